"""The demo's data: English-like text generated from a small grammar (nothing
is downloaded, nothing copied from a book), as character ids.

The grammar has number agreement (``the cat sees`` / ``the cats see``),
adjectives, prepositional phrases, relative clauses and a few fixed phrases,
so a character model has structure to learn at several ranges: spelling,
agreement across a phrase, punctuation after a clause.
"""
import numpy as np

_NOUNS = ["cat", "dog", "bird", "fox", "child", "farmer", "sailor", "teacher", "horse",
          "river", "garden", "window", "letter", "lamp", "boat", "tree", "stone", "song"]
_PLURAL = {"child": "children", "fox": "foxes"}
_ADJ = ["small", "old", "quiet", "bright", "green", "tired", "clever", "heavy", "cold",
        "happy", "distant", "wooden"]
_VERBS = ["see", "follow", "find", "carry", "watch", "paint", "remember", "hear", "visit"]
_VERB_S = {"carry": "carries", "watch": "watches"}
_PREP = ["near", "under", "behind", "beside", "across", "beyond"]
_ADV = ["slowly", "again", "today", "at night", "in the morning", "without a sound"]
_FIXED = ["once upon a time", "and so it was", "nobody knows why", "after a while"]


def _noun_phrase(rng, plural):
    n = _NOUNS[rng.integers(len(_NOUNS))]
    word = _PLURAL.get(n, n + "s") if plural else n
    det = ["the", "some", "many"][rng.integers(3)] if plural else ["the", "a", "one"][rng.integers(3)]
    adj = f"{_ADJ[rng.integers(len(_ADJ))]} " if rng.random() < 0.5 else ""
    if det == "a" and adj[:1] in ("a", "e", "i", "o", "u"):
        det = "an"
    return f"{det} {adj}{word}"


def _verb(rng, plural):
    v = _VERBS[rng.integers(len(_VERBS))]
    return v if plural else _VERB_S.get(v, v + "s")


def _clause(rng):
    plural = rng.random() < 0.4
    s = f"{_noun_phrase(rng, plural)}"
    if rng.random() < 0.25:
        s += f" that {_verb(rng, plural)} {_noun_phrase(rng, rng.random() < 0.4)}"
    s += f" {_verb(rng, plural)} {_noun_phrase(rng, rng.random() < 0.4)}"
    if rng.random() < 0.4:
        s += f" {_PREP[rng.integers(len(_PREP))]} {_noun_phrase(rng, rng.random() < 0.4)}"
    if rng.random() < 0.3:
        s += f" {_ADV[rng.integers(len(_ADV))]}"
    return s


def sentence(rng):
    s = _clause(rng)
    r = rng.random()
    if r < 0.2:
        s = f"{_FIXED[rng.integers(len(_FIXED))]}, {s}"
    elif r < 0.35:
        s = f"{s}, and {_clause(rng)}"
    return s + ".\n" if rng.random() < 0.2 else s + ". "


def generate_text(n_chars, seed=0):
    rng = np.random.default_rng(seed)
    parts, n = [], 0
    while n < n_chars:
        s = sentence(rng)
        parts.append(s)
        n += len(s)
    return "".join(parts)[:n_chars]


class CharData:
    """Generated text split 90/10 into train/validation ids, with a
    vocabulary of the characters that occur (``itos``) and a seeded batch
    sampler of (inputs, next-character targets), each (B, T) int64."""

    def __init__(self, n_chars=200_000, seed=0):
        text = generate_text(n_chars, seed)
        self.itos = sorted(set(text))
        lut = {c: i for i, c in enumerate(self.itos)}
        ids = np.fromiter((lut[c] for c in text), dtype=np.int64, count=len(text))
        cut = int(0.9 * len(ids))
        self.train, self.val = ids[:cut], ids[cut:]

    @property
    def vocab(self):
        return len(self.itos)

    def batch(self, rng, B, T, split="train"):
        ids = self.train if split == "train" else self.val
        start = rng.integers(0, len(ids) - T - 1, B)
        rows = start[:, None] + np.arange(T + 1)[None, :]
        chunk = ids[rows]
        return chunk[:, :-1].copy(), chunk[:, 1:].copy()

    def decode(self, ids):
        return "".join(self.itos[int(i)] for i in ids)
