import csv
import json
import re
from datetime import UTC, datetime, timedelta

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from gateway.selectors import REPORT_GROUPS, usage_report

_SPAN = re.compile(r"(\d+)([hdw])")
_UNITS = {"h": "hours", "d": "days", "w": "weeks"}


def parse_since(value: str, *, now: datetime) -> datetime:
    """``7d``, ``24h``, ``2w`` before now, or an ISO date or time (UTC when none given)."""
    span = _SPAN.fullmatch(value.strip())
    if span:
        return now - timedelta(**{_UNITS[span.group(2)]: int(span.group(1))})
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        raise CommandError(
            f"--since takes a span (7d, 24h, 2w) or an ISO date, not {value!r}."
        ) from None
    return moment if timezone.is_aware(moment) else moment.replace(tzinfo=UTC)


class Command(BaseCommand):
    help = "Calls, errors and tokens per key, model or day since a moment (from usage records)."

    def add_arguments(self, parser):
        parser.add_argument("--since", default="7d", help="7d, 24h, 2w or an ISO date (UTC).")
        parser.add_argument("--by", choices=REPORT_GROUPS, default="key")
        parser.add_argument("--format", choices=("table", "csv", "json"), default="table")

    def handle(self, *args, **opts):
        since = parse_since(opts["since"], now=timezone.now())
        rows = usage_report(since=since, by=opts["by"])
        columns = [opts["by"], "calls", "errors", "prompt_tokens", "completion_tokens", "tokens"]
        if opts["format"] == "json":
            self.stdout.write(json.dumps({"since": since.isoformat(), "rows": rows}, indent=2))
        elif opts["format"] == "csv":
            writer = csv.DictWriter(self.stdout, fieldnames=columns, lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
        else:
            self.write_table(columns, rows, since)

    def write_table(self, columns: list[str], rows: list[dict], since: datetime) -> None:
        self.stdout.write(f"Usage since {since:%Y-%m-%d %H:%M} UTC, by {columns[0]}")
        cells = [columns] + [[str(row[c]) for c in columns] for row in rows]
        widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
        for n, line in enumerate(cells):
            first = line[0].ljust(widths[0])
            rest = (value.rjust(width) for value, width in zip(line[1:], widths[1:], strict=True))
            self.stdout.write("  ".join((first, *rest)))
            if n == 0:
                self.stdout.write("  ".join("-" * width for width in widths))
        if not rows:
            self.stdout.write("(no calls)")
