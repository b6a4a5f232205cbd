from __future__ import annotations

import pickle

import pytest

from backends.errors import Aside, ContextLengthExceeded, Field, InvalidRequest, Overloaded

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("cls", [ContextLengthExceeded, Overloaded])
def test_errors_keep_their_fields_through_pickling(cls: type) -> None:
    """The prompt worker process raises them; the server must still name the field."""
    error = pickle.loads(pickle.dumps(cls("too long", param="prompt", headers={"a": "b"})))
    assert (type(error), error.message, error.param, error.headers) == (
        cls,
        "too long",
        "prompt",
        {"a": "b"},
    )


def test_a_door_renames_the_fields_an_error_names_and_nothing_else() -> None:
    """The core names its own fields (Field); a door tells them by its own names. A plain
    string that happens to spell a field's name stays as it is."""
    prompt = Field("prompt")
    error = InvalidRequest(["The prompt is long: shorten the ", prompt, "."], param=prompt)
    error = pickle.loads(pickle.dumps(error))  # as from the prompt worker process
    told = error.renamed({"prompt": "messages"}.__getitem__)
    assert (type(told), told.param) == (InvalidRequest, "messages")
    assert told.message == "The prompt is long: shorten the messages."
    plain = InvalidRequest("No prompt.", param="prompt")
    assert plain.renamed({"prompt": "messages"}.__getitem__) is plain


def test_an_aside_is_told_with_the_doors_name_or_left_out_where_it_has_none() -> None:
    """Words that need a field (a way out of the error) say the door's name for it; a door
    with no such field says the rest of the message without them."""
    words = Aside(", or ask for truncation ({})", Field("truncate"))
    error = ContextLengthExceeded(["Input 0 is too long. Shorten it", words, "."])
    assert error.message == "Input 0 is too long. Shorten it, or ask for truncation (truncate)."
    error = pickle.loads(pickle.dumps(error))
    told = error.renamed({"truncate": "truncate_prompt_tokens"}.__getitem__)
    assert told.message == (
        "Input 0 is too long. Shorten it, or ask for truncation (truncate_prompt_tokens)."
    )
    assert error.renamed({"truncate": ""}.__getitem__).message == "Input 0 is too long. Shorten it."
