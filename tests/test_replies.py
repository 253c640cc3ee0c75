"""Reply cleaning and the arithmetic finder, case by case (pure functions)."""

import pytest

from agents.arithmetic import arithmetic_expression, format_value, plan
from agents.replies import clean_reply


@pytest.mark.parametrize(
    ("raw", "clean", "removed"),
    [
        ("Italy", "Italy", []),
        ('"Hello Pixel, what\'s your name?"', "Hello Pixel, what's your name?", ["quotes"]),
        ("“Rome.”", "Rome.", ["quotes"]),
        ("'Yes.'", "Yes.", ["quotes"]),
        ('"Hi" and "bye"', '"Hi" and "bye"', []),  # quotes inside, not around
        ("Assistant: Pixel.", "Pixel.", ["role_label"]),
        ("Paris.\nUser: And Rome?\nAssistant: Rome.", "Paris.", ["invented_turn"]),
        ("Sure.\n\nuser: thanks", "Sure.", ["invented_turn"]),
        ("391\nTask: What is 2 + 2?", "391", ["invented_turn"]),
        ("User: What is my name?", "", ["invented_turn"]),
        (
            '- computer: Determines the CPU and RAM. Arguments: {"device": string}\n'
            "- keyboard: Types keys. Arguments: {}",
            "",
            ["tool_list"],
        ),
        (
            "Hello, my name is Adam\n- camera: Takes a photo of the user's hand. Arguments: {}",
            "Hello, my name is Adam",
            ["tool_list"],
        ),
        (
            "Hello, my name is Adam - camera: Takes a photo. Arguments: {}",
            "Hello, my name is Adam",
            ["tool_list"],
        ),
        (
            "Sure.\n- search: Finds. Arguments: {}\n- weather: Says the weather.\nBye.",
            "Sure.\nBye.",
            ["tool_list"],
        ),
        ("Ok.\n(12 earlier messages are not shown here.)", "Ok.", ["tool_list"]),
        # The note of a clipped message in the prompt, copied (conversations.clipping).
        (
            "It moved to the 11th of May. [message cut: about 15 tokens not shown]",
            "It moved to the 11th of May.",
            ["tool_list"],
        ),
        ("Shopping list:\n- milk: two litres\n- eggs: six", None, []),  # a real list stays
        ("A: yes", "A: yes", []),
        ("", "", []),
        (
            "The sea is calm. It is a symbol of hope. It is a symbol of hope. It is a",
            "The sea is calm. It is a symbol of hope.",
            ["repeated"],
        ),
        ("I like tea.\ni like TEA!", "I like tea.", ["repeated"]),
        ("Yes. Yes. No.", "Yes. Yes. No.", []),  # too short to be a loop
        ("It is red. It is red and blue.", None, []),  # another sentence
    ],
)
def test_a_reply_is_cleaned_case_by_case(raw, clean, removed):
    cleaned = clean_reply(raw)
    assert cleaned.text == (raw if clean is None else clean)
    assert cleaned.removed == removed


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("She plays the cello.\nElif: Yes, she's a good musician.", "She plays the cello."),
        ("Marta, I'm calling.\nMarta Silva: Yes, hello.", "Marta, I'm calling."),
        ("Pixel: that is his name.", "Pixel: that is his name."),  # the first line stays
        ("Bring:\n- milk\nNote:", "Bring:\n- milk\nNote:"),  # no text after the label
        ("Two steps.\nStep one: mix it.", "Two steps.\nStep one: mix it."),
    ],
)
def test_a_transcript_reply_loses_a_later_line_in_someone_elses_name(raw, clean):
    assert clean_reply(raw, transcript=True).text == clean
    assert clean_reply(raw).text == raw  # a chat model's reply may have such lines


@pytest.mark.parametrize(
    ("task", "expression"),
    [
        ("What is 17 * 23?", "17 * 23"),
        ("What is 25 times 16?", "25 * 16"),
        ("What is 81 divided by 3?", "81 / 3"),
        ("What is 2 to the power of 10?", "2 ** 10"),
        ("What is (3 + 4) x 2?", "(3 + 4) * 2"),
        ("How much is 1,000 - 357?", "1000 - 357"),
        ("What is 7 minus 2?", "7 - 2"),
        ("Say hello to the team.", None),
        ("Call 555-1234 tomorrow.", None),
        ("Meet on 2024-05-03.", None),
        ("Is 5 bigger than 3?", None),
        ("What is six times seven?", "6 * 7"),
        ("What is 15% of 80?", "15 * 80 / 100"),
        ("What is half of 3 dozen?", "(3 * 12) / 2"),
        ("What is the average of 4, 8 and 12?", "(4 + 8 + 12) / 3"),
        ("What is 2.5 times 4?", "2.5 * 4"),  # a decimal point is not a full stop
        ("What is the square root of 81?", "81 ** 0.5"),
        ("Cut 80 in half.", "80 / 2"),
        ("Remove 15 from 60.", "60 - 15"),
        ("Add 6 and 9 and 12.", "6 + 9 + 12"),
        ("Quadruple 12.", "4 * 12"),
        ("How many is half a dozen plus 4?", "(12 / 2) + 4"),
        # A change by a fraction, and numbers that "add up".
        ("Cut 90 by a third.", None),  # "cut" is not a change by a fraction
        ("Lower 90 by a third.", "90 - 90 / 3"),
        ("Raise 40 by a quarter.", "40 + 40 / 4"),
        ("Reduce 50 by half.", "50 - 50 / 2"),
        ("What do 30 and 12 add up to?", "30 + 12"),
        ("What are 7, 8 and 9 added together?", "7 + 8 + 9"),
        ("What are 2, 3 and 4 multiplied together?", "2 * 3 * 4"),
        ("Write a haiku about autumn.", None),
        ("List 3 fruits and 2 vegetables.", None),
    ],
)
def test_the_arithmetic_of_a_task_is_found(task, expression):
    assert arithmetic_expression(task) == expression


@pytest.mark.parametrize(
    ("task", "steps"),
    [
        ("Add 17 and 25, then multiply by 3", ["17 + 25", "P * 3"]),
        ("Start with 10, add 5, then double it.", ["10 + 5", "2 * P"]),
        ("Subtract 8 from 50 and then divide the result by 2.", ["50 - 8", "P / 2"]),
        ("Take 10% of 250, then add 5 to it.", ["10 * 250 / 100", "P + 5"]),
        ("What is 81 divided by 9, plus 1?", ["81 / 9", "P + 1"]),
        ("What is 19 plus 23, divided by 2?", ["19 + 23", "P / 2"]),
        ("What is four times 12, then halved?", ["4 * 12", "P / 2"]),
        ("Start at 100, then subtract 25.", ["100 - 25"]),
        ("Start with 80, then increase it by a quarter.", ["80 + 80 / 4"]),
        ("What do 30 and 12 add up to?", ["30 + 12"]),
        ("Begin with 70, take off 10, then divide by 6.", ["70 - 10", "P / 6"]),
        ("Multiply 6 by 5, then reduce that by a third.", ["6 * 5", "P - P / 3"]),
        # A next step joined by a plain "and".
        ("Subtract 9 from 50 and divide the result by 4.", ["50 - 9", "P / 4"]),
        ("Multiply 6 by 7 and add 8.", ["6 * 7", "P + 8"]),
        ("Add 3 to 4 and square the result.", ["4 + 3", "P ** 2"]),
        ("Add 2 and 3 and multiply by 4.", ["2 + 3", "P * 4"]),
        # The previous value as the operand a phrase names.
        ("Find the product of 4 and 15, and subtract it from 100.", ["4 * 15", "100 - P"]),
    ],
)
def test_a_task_in_several_steps_is_read_as_calculator_steps(task, steps):
    found = plan(task)
    assert found is not None and found.pure
    assert found.steps == steps


def test_arithmetic_inside_a_task_that_asks_for_more_is_not_pure():
    found = plan("Explain why 2 + 2 = 4.")
    assert found is not None and not found.pure
    assert found.steps == ["2 + 2"]


@pytest.mark.parametrize(("value", "text"), [(391, "391"), (12.0, "12"), (1 / 3, "0.3333333333")])
def test_a_value_is_written_as_a_person_writes_it(value, text):
    assert format_value(value) == text
