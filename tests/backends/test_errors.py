from __future__ import annotations

import pickle

import pytest

from backends.errors import ContextLengthExceeded, Overloaded

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
