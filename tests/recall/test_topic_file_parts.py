"""A topic file is cut into passages the on-device model reads whole (``ranking.details_parts``): a short file
stays one passage, exactly as before; a long one is cut between paragraphs and lines, never inside a word, into
parts that join back into the file and that each fit the model's 128 tokens."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer

from localai_memory.recall.embedders import DEFAULT_MAX_TOKENS, TOKENIZER_PATH
from localai_memory.recall.ranking import (
    PASSAGE_MAX_PIECES,
    details_parts,
    note_passages,
    passage_text,
    text_pieces,
)

SENTENCES = [
    "Runs four times a week along the Tiber, early, before the heat.",
    "Keeps a training log in a spreadsheet with pace, distance and how the legs felt.",
    "Long run on Sundays, twenty kilometres at an easy pace, with a gel every forty minutes.",
    "Tempo on Wednesdays: three kilometres warm-up, five at threshold, two easy.",
    "New shoes in March: more cushioning, a wider toe box, half a size up.",
    "The physio said to stretch calves daily after the Achilles scare in January.",
    "Goal for the half marathon: under one hour fifty, negative split if the legs allow.",
]


@pytest.fixture(scope="module")
def tokens():
    tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return lambda text: len(tokenizer.encode(text).ids)  # with [CLS] and [SEP], as the model reads it


def paragraphs(count: int, per: int = 3) -> str:
    return "\n\n".join(" ".join(SENTENCES[(p + k) % len(SENTENCES)] for k in range(per)) for p in range(count)) + "\n"


def recent_chats(lines: int = 30) -> str:
    return "".join(f"- 2025-06-{30 - n % 28:02d}: {SENTENCES[n % len(SENTENCES)]}\n" for n in range(lines))


def test_a_short_file_is_one_passage_exactly_as_written():
    text = "  No meat or fish.\nEggs are fine.\n\n"
    assert details_parts(text) == [text]
    assert details_parts(paragraphs(1)) == [paragraphs(1)]
    assert note_passages("diet", "vegetarian", text) == ["my diet: vegetarian", "my diet: No meat or fish.\nEggs are fine."]


@pytest.mark.parametrize("text", [paragraphs(8), recent_chats(30), "# Running\n\n" + paragraphs(5, per=5),
                                  " ".join(SENTENCES * 6) + "\n"],
                         ids=["paragraphs", "recent-chats", "headings", "one-long-line"])
def test_a_long_file_is_cut_into_parts_the_model_reads_whole(text, tokens):
    parts = details_parts(text)
    assert len(parts) > 1 and "".join(parts) == text
    assert all(part.strip() for part in parts)
    assert all(text_pieces(part) <= PASSAGE_MAX_PIECES for part in parts)
    assert max(tokens(passage_text("recent-chats", part)) for part in parts) <= DEFAULT_MAX_TOKENS
    assert details_parts(text) == parts  # the same text always gives the same parts


def test_parts_start_where_paragraphs_start():
    text = paragraphs(6)
    starts = {paragraph.strip() for paragraph in text.split("\n\n")}
    parts = details_parts(text)
    assert all(part.strip().split("\n\n")[0] in starts for part in parts)


def test_a_heading_stays_with_the_paragraph_under_it():
    text = paragraphs(2, per=4) + "\n## Injuries\n\n" + paragraphs(1, per=4)
    [part] = [part for part in details_parts(text) if "## Injuries" in part]
    assert part.strip().startswith("## Injuries\n\n" + SENTENCES[0])


def test_a_very_long_line_is_cut_between_words():
    line = " ".join(SENTENCES * 6) + "\n"
    parts = details_parts(line)
    words = line.split()
    assert [word for part in parts for word in part.split()] == words  # no word cut in two
    assert len(parts) == -(-text_pieces(line) // PASSAGE_MAX_PIECES)


def test_the_last_few_lines_of_a_paragraph_are_not_left_alone():
    lines = "".join(f"{sentence}\n" for sentence in SENTENCES)  # one paragraph, a little over one passage
    assert PASSAGE_MAX_PIECES < text_pieces(lines) < PASSAGE_MAX_PIECES * 1.25
    first, last = details_parts(lines)
    assert first + last == lines and min(text_pieces(first), text_pieces(last)) > PASSAGE_MAX_PIECES / 4


def test_a_short_last_paragraph_is_a_passage_of_its_own():
    text = paragraphs(2, per=4) + "\nCarries an EpiPen.\n"
    assert details_parts(text)[-1] == "\nCarries an EpiPen.\n"


def test_a_paragraph_added_at_the_end_leaves_the_parts_before_it_as_they_were():
    text = paragraphs(5)
    longer = text + "\n" + paragraphs(1, per=4)
    assert details_parts(longer)[: len(details_parts(text))] == details_parts(text)


def test_note_passages_are_the_line_and_every_part():
    text = paragraphs(6)
    assert note_passages("running", "training for a half marathon", text) == [
        "my running: training for a half marathon", *(f"my running: {part.strip()}" for part in details_parts(text))]
