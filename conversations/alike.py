"""Whether two words name the same thing though they differ ("bike" and "bicycle", "mum" and
"mother"), for the reply checks that ask whether the user ever named what a question asks
about (``borrowing``'s ``never_said`` and ``elsewhere``): "Where do I keep my bicycle?"
after "My bike is in the hall." is answered by that message.

* Kin words, by the table below: the relation and the sex it names. Two are alike when they
  name one relation and not two sexes ("granny" and "grandmother", "sibling" and "sister";
  not "aunt" and "uncle"). A kin word and another word are never alike. Vectors cannot
  tell these apart: the embedder puts "wife" as close to "husband" (0.87) as "mum" to
  "mother" (0.85).
* Other words, by the embedder: the cosine of the two words' vectors, each embedded alone,
  at least ``SAME_THING``. On the in-process model (all-MiniLM-L6-v2) words that name one
  thing were 0.75 to 0.92 apart ("yacht"/"boat", "sofa"/"couch", "bike"/"bicycle"), and
  different things of one kind up to 0.75 ("oboe"/"clarinet" 0.746, "canoe"/"kayak" 0.69,
  "dog"/"cat" 0.66) but "city"/"town" (0.77); "boat"/"canoe" (0.74) falls below it. Other
  embedding models score on other scales, so only that one is used (``embedded_alike``).
"""

from collections.abc import Callable

import numpy as np

from conversations.wording import word_set
from gateway import embeddings, local_embedder

# A word's vector, L2-normalised; raises EmbeddingUnavailable when the embedder is down.
Embed = Callable[[str], np.ndarray]
# Whether two words name the same thing (``alike`` with the embedder at hand, or without).
Alike = Callable[[str, str], bool]
# The least cosine of two (non-kin) words that name the same thing.
SAME_THING = 0.75

_FEMALE, _MALE = "f", "m"
# English kin words: word -> (relation, sex or None). Words of one relation and sex are
# the same person's names; a relation without a sex ("cousin", "parent") is either.
_KIN_WORDS = {
    ("parent", _FEMALE): "mother mum mom mummy mommy mama mam ma",
    ("parent", _MALE): "father dad daddy papa pa",
    ("parent", None): "parent",
    ("sibling", _FEMALE): "sister sis",
    ("sibling", _MALE): "brother bro",
    ("sibling", None): "sibling",
    ("child", _FEMALE): "daughter",
    ("child", _MALE): "son",
    ("child", None): "child kid",
    ("spouse", _FEMALE): "wife",
    ("spouse", _MALE): "husband",
    ("spouse", None): "spouse",
    ("grandparent", _FEMALE): "grandmother grandma granny grannie gran nan nana nanna",
    ("grandparent", _MALE): "grandfather grandpa grandad granddad gramps grampa",
    ("grandparent", None): "grandparent",
    ("grandchild", _FEMALE): "granddaughter",
    ("grandchild", _MALE): "grandson",
    ("grandchild", None): "grandchild grandkid",
    ("pibling", _FEMALE): "aunt auntie aunty",
    ("pibling", _MALE): "uncle",
    ("nibling", _FEMALE): "niece",
    ("nibling", _MALE): "nephew",
    ("cousin", None): "cousin",
}
KIN = {word: kind for kind, names in _KIN_WORDS.items() for word in names.split()}


def kin(word: str) -> tuple[str, str | None] | None:
    """The relation and sex a kin word names, its plural too ("grannies", "sisters"), or None."""
    word = word.lower().removesuffix("'s")
    forms = (word, word.removesuffix("s"), word.removesuffix("ies") + "y", word[:-3] + "ie")
    return next((KIN[form] for form in forms if form in KIN), None)


# Words before a kin word that make the relative someone else's ("the aunt", "her son").
_OTHERS = word_set("the a an his her their your its whose this that these those any some every")


def own_kin(found: list[str]) -> int | None:
    """The index of the first kin word among ``found`` (a text's words) that names the
    speaker's own relative: with no article or other owner before it ("What was granny's
    job?", "Mum lives in Ghent."; not "the aunt", "Tom's mother"), or None."""
    for index, word in enumerate(found):
        before = found[index - 1] if index else ""
        if kin(word) and before not in _OTHERS and not before.endswith("'s"):
            return index
    return None


def kin_alike(one: str, other: str) -> bool | None:
    """Whether two words name the same relative (see the module); None when neither is a
    kin word."""
    first, second = kin(one), kin(other)
    if first is None and second is None:
        return None
    if first is None or second is None or first[0] != second[0]:
        return False
    return first[1] is None or second[1] is None or first[1] == second[1]


def alike(one: str, other: str, embed: Embed | None = None) -> bool:
    """Whether two words name the same thing (see the module): the same word, kin words of
    one relation and sex, or, given ``embed``, other words at least ``SAME_THING`` alike
    in meaning. False when the embedder is down."""
    one, other = one.lower(), other.lower()
    if one == other:
        return True
    by_kin = kin_alike(one, other)
    if by_kin is not None or embed is None or not (one.isalpha() and other.isalpha()):
        return bool(by_kin)
    try:
        return float(embed(one) @ embed(other)) >= SAME_THING
    except embeddings.EmbeddingUnavailable:
        return False


def embedded_alike() -> Alike:
    """:func:`alike` with the in-process embedder's word vectors (each word embedded once
    per process, ``embeddings.embed_query``'s cache), or with kin words only when another
    embedding model is configured (``SAME_THING`` was measured on that one)."""
    if embeddings.model_id() != f"local:{local_embedder.MODEL_NAME}":
        return alike
    return lambda one, other: alike(one, other, embeddings.embed_query)
