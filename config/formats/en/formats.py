"""Dates and times as the admin shows them: ISO-like, to the second (Django's English
formats stop at the minute, which hides the order of events a few seconds apart)."""

DATETIME_FORMAT = "Y-m-d H:i:s"
SHORT_DATETIME_FORMAT = "Y-m-d H:i:s"
DATE_FORMAT = "Y-m-d"
SHORT_DATE_FORMAT = "Y-m-d"
TIME_FORMAT = "H:i:s"
