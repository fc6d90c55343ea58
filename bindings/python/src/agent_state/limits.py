"""The library's limits on values, which the binding checks itself before any call into the
library, so that what the library would refuse fails the same way in every binding."""

#: The largest integer JavaScript's numbers hold exactly (``Number.MAX_SAFE_INTEGER``). Python
#: ints beyond it (in absolute value) are written as ``$bigint``.
MAX_SAFE_INTEGER = 2**53 - 1

#: The library's nesting limit (``MAX_DEPTH`` in ``crates/agent_state/src/value/codec.rs``): the top-level object of a
#: state is level 1, each array or object one more; a ``$map`` takes three levels (object,
#: array, pair), a ``$set`` two, the other tagged values one. Deeper values are refused by the
#: encoder, at every depth, with the library's status (past 128 levels the library's parser
#: would stop and report malformed JSON instead).
MAX_DEPTH = 64

#: The most agents one call of ``list_agents`` or ``expire_agents`` lists or deletes
#: (``MAX_LIST_LIMIT`` in ``crates/agent_state/src/store/types.rs``).
MAX_LIST_LIMIT = 10000
