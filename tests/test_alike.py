"""Words that name the same thing though they differ ("bike" and "bicycle", "mum" and
"mother") let a right answer through the never-said check; kin words of another relation or
sex ("aunt" and "uncle"), and other words unlike in meaning, do not."""

import numpy as np

from conversations import alike
from conversations.asking import asks_about_the_user
from conversations.borrowing import borrowed
from conversations.told import asked_subject, names_subject
from gateway import embeddings, local_embedder
from tests.test_borrowing import context

# Two-dimensional "vectors": the cosine of two words is the product of their rows.
_VECTORS = {
    "bike": (1.0, 0.0),
    "bicycle": (0.92, 0.39),
    "boat": (0.0, 1.0),
    "kayak": (0.7, 0.71),
}


def fake_embed(word: str) -> np.ndarray:
    return np.array(_VECTORS[word])


def fake_alike(one: str, other: str) -> bool:
    return alike.alike(one, other, fake_embed)


def down(word: str) -> np.ndarray:
    raise embeddings.EmbeddingUnavailable("down")


def test_kin_words_of_one_relation_and_sex_are_alike():
    assert alike.alike("mum", "mother")
    assert alike.alike("granny", "grandmother")
    assert alike.alike("grandad", "grandfather")
    assert alike.alike("Grannies", "grandma")
    assert alike.alike("sister", "sibling")
    assert alike.alike("cousin", "cousins")


def test_kin_words_of_another_relation_or_sex_are_not_alike():
    assert not alike.alike("aunt", "uncle")
    assert not alike.alike("wife", "husband")
    assert not alike.alike("mother", "grandmother")
    assert not alike.alike("niece", "daughter")
    # A kin word and another word, whatever the embedder says.
    assert not alike.alike("mother", "bike", fake_embed)


def test_other_words_are_alike_by_the_embedders_cosine():
    assert alike.alike("bike", "bicycle", fake_embed)  # 0.92
    assert not alike.alike("bike", "kayak", fake_embed)  # 0.70
    assert not alike.alike("bike", "boat", fake_embed)
    # Without an embedder, or with one that is down, only the same word.
    assert not alike.alike("bike", "bicycle")
    assert not alike.alike("bike", "bicycle", down)
    assert alike.alike("Bike", "bike", down)


def test_a_message_names_the_subject_by_a_word_alike():
    question = "Where do I keep my bicycle?"
    assert names_subject(("bicycl",), question, ("bike",), "My bike is in the hall.", fake_alike)
    assert not names_subject(("bicycl",), question, ("bike",), "My bike is in the hall.")
    assert not names_subject(("bicycl",), question, ("kayak",), "My kayak is at the lake.")


def test_a_right_answer_in_other_words_is_not_replaced_as_never_said():
    bicycle = context("Where do I keep my bicycle?", "My bike is in the hall.", "Nice.")
    assert borrowed("In the hall.", bicycle, "", alike=fake_alike) is None
    assert borrowed("In the hall.", bicycle, "").problem == "never_said"
    mother = context("Where does my mother live?", "My mum lives in Ghent.", "Nice.")
    assert borrowed("Your mother lives in Ghent.", mother, "", alike=alike.alike) is None
    # Another relative's answer is still never said.
    uncle = context("What does my uncle do?", "My aunt breeds horses.", "Nice.")
    found = borrowed("Your uncle breeds horses.", uncle, "", alike=alike.alike)
    assert (found.problem, found.words) == ("never_said", ("uncl", "aunt"))
    kayak = context("Where do I keep my bike?", "My kayak is at the lake.", "Nice.")
    assert borrowed("At the lake.", kayak, "", alike=fake_alike).problem == "never_said"


def test_the_in_process_embedder_finds_synonyms_alike_and_kinds_apart(settings):
    settings.EMBEDDING_BACKEND = "local"
    embeddings.forget()
    assert embeddings.model_id() == f"local:{local_embedder.MODEL_NAME}"
    same = alike.embedded_alike()
    assert same("bike", "bicycle")
    assert same("sofa", "couch")
    assert not same("dog", "cat")
    assert not same("canoe", "kayak")
    assert not same("wife", "husband")


def test_a_relative_named_without_my_is_the_users_own():
    assert asked_subject("What was granny's job?") == ("granny", "job")
    assert asks_about_the_user("Where does Mum live?")
    assert not asks_about_the_user("What is Tom's mother called?")
    assert not asks_about_the_user("Who is the aunt in the film?")
    tailor = context("What was granny's job?", "My grandfather was a tailor.", "Nice.")
    found = borrowed("Granny was a tailor.", tailor, "", alike=alike.alike)
    assert (found.problem, found.words) == ("never_said", ("granny", "grandfather"))
    told = context("What was granny's job?", "My grandmother was a seamstress.", "Nice.")
    assert borrowed("She was a seamstress.", told, "", alike=alike.alike) is None
