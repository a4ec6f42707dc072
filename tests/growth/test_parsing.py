"""Reading the model's consolidation reply: whatever JSON is in there is recovered, nothing else is trusted."""

from __future__ import annotations

import pytest

from localai_memory.growth.parsing import UNNAMED, Candidate, parse_reply, slugify

CLEAN = '{"facts": [{"action": "add", "topic": "home", "summary": "lives in Lisbon"}], "summary": "Moved"}'


@pytest.mark.parametrize("text", [
    CLEAN,
    "```json\n" + CLEAN + "\n```",
    "```\n" + CLEAN + "\n```",
    "Sure! Here you go:\n\n" + CLEAN + "\n\nAnything else?",
    "Here: ```json\n" + CLEAN.replace("}]", "},]") + "\n``` done",
    ('{\n  // the facts\n  "facts": [{"action": "add", "topic": "home", "summary": "lives in Lisbon"}],\n'
     '  "summary": "Moved",\n}'),
])
def test_clean_fenced_and_chatty_replies_give_the_same_facts(text):
    parsed = parse_reply(text)

    assert parsed.candidates == [Candidate("add", "home", "lives in Lisbon")]
    assert parsed.summary == "Moved"


def test_a_bare_list_of_facts_is_read():
    parsed = parse_reply('[{"topic": "diet", "summary": "vegan"}, "prefers metric units"]')

    assert parsed.candidates == [Candidate("add", "diet", "vegan"),
                                 Candidate("add", "prefers-metric-units", "prefers metric units")]


def test_a_reply_without_json_is_no_facts_and_no_error():
    assert parse_reply("I could not find anything durable.").candidates == []
    assert parse_reply("").candidates == [] and parse_reply(None).summary == ""
    assert parse_reply('{"facts": "not a list"}').candidates == []


def test_action_words_and_topics_are_normalised():
    parsed = parse_reply('{"facts": [{"action": "Remove", "topic": "Old Job"}, '
                         '{"action": "modify", "topic": "Home Town!", "summary": "  lives\\nin  Porto "}, '
                         '{"action": "add", "topic": "", "summary": ""}]}')

    assert parsed.candidates == [Candidate("delete", "old-job", ""), Candidate("update", "home-town", "lives in Porto")]


def test_a_topic_is_made_from_the_summary_when_the_model_gives_none():
    assert slugify(None, "The user prefers answers in German") == "prefers-answers-german"
    assert slugify(None, "Ich wohne in München mit meiner Schwester") == "wohne-munchen-schwester"
    assert slugify(None, "J'habite à Paris depuis 2020") == "habite-paris-depuis"
    assert slugify(None, "Mi hermana vive en Madrid") == "hermana-vive-madrid"
    assert slugify("index", "index") == ""


def test_a_topic_made_from_the_summary_keeps_its_negation():
    assert slugify(None, "The user doesn't eat meat") == "doesnt-eat-meat"
    assert slugify(None, "The user is not married") == "not-married"
    assert slugify(None, "No peanuts, ever") == "no-peanuts-ever"
    assert slugify(None, "The user no longer lives in Rome") == "no-longer-lives-rome"
    assert slugify(None, "Ich esse kein Fleisch") == "esse-kein-fleisch"
    assert slugify(None, "Je ne mange plus de viande") == "ne-mange-plus-viande"
    assert slugify(None, "Non bevo mai caffè") == "non-bevo-mai-caffe"
    assert slugify(None, "The user's dog is called Rex") == "dog-called-rex"
    parsed = parse_reply('{"facts": ["The user does not drink alcohol"]}')
    assert [c.topic for c in parsed.candidates] == ["does-not-drink-alcohol"]


def test_a_fact_in_a_script_no_topic_can_hold_is_kept_unnamed_for_the_pass_to_name():
    """Russian, Greek, Chinese, Arabic: no ASCII word to name the topic by, and a topic the model wrote in
    that script is no slug either. The fact stays (an add the pass names); a delete names no note."""
    parsed = parse_reply('{"facts": [{"action": "add", "topic": "дом", "summary": "Живу в Риме"}, '
                         '{"action": "update", "summary": "Μένω στην Αθήνα"}, "我住在北京", '
                         '{"action": "add", "topic": "مدينة", "summary": "أسكن في القاهرة", "details": "منذ 2020"}, '
                         '{"action": "delete", "topic": "дом", "summary": "Живу в Риме"}, '
                         '{"action": "noop", "topic": "дом", "summary": "Живу в Риме"}]}')

    assert parsed.candidates == [Candidate("add", UNNAMED, "Живу в Риме"), Candidate("add", UNNAMED, "Μένω στην Αθήνα"),
                                 Candidate("add", UNNAMED, "我住在北京"),
                                 Candidate("add", UNNAMED, "أسكن في القاهرة", "منذ 2020")]


def test_a_summary_is_one_short_line():
    parsed = parse_reply('{"facts": [{"topic": "bio", "summary": "' + "word " * 80 + '"}]}')

    assert len(parsed.candidates[0].summary) <= 200 and "\n" not in parsed.candidates[0].summary
