"""The read side of factledger: the store, the knowledge base, the trust policy, the prompt
path and agents' reads, as README documents them.

`__all__` is what users call. `replay` reaches the rest of the package through
`projections.internal`; every other module is private, its name starting with `_`
(docs/architecture.md).
"""

from __future__ import annotations

from eventlog import (
    __version__,
)
from projections._agent_reads import (
    AgentEntries,
    AgentFacts,
    AgentIdentity,
    read_entries,
    read_facts,
    read_history,
    read_tags,
    recall,
)
from projections._compat import (
    CrossTaskKB,
    PublishCounter,
    SQLiteMemoryStore,
    get_global_counter,
)
from projections._entries import (
    Fact,
    MemoryEntry,
)
from projections._errors import (
    CacheChoiceError,
    CacheRefusedError,
    LegacyImportError,
    SecretRefusedError,
    SyncTimeoutError,
)
from projections._prompt import (
    Recall,
    load_persistent_memory,
    recall_memory,
)
from projections._receipts import Receipt
from projections._redaction import (
    redact_value,
)
from projections._trust import (
    MemoryTrustPolicy,
    active_trust_policy,
)
from projections._view import (
    MemoryView,
    open_view,
)
from projections._visible import (
    escape_invisible,
)

__all__ = [
    "AgentEntries",
    "AgentFacts",
    "AgentIdentity",
    "CacheChoiceError",
    "CacheRefusedError",
    "CrossTaskKB",
    "Fact",
    "LegacyImportError",
    "MemoryEntry",
    "MemoryTrustPolicy",
    "MemoryView",
    "PublishCounter",
    "Recall",
    "Receipt",
    "SQLiteMemoryStore",
    "SecretRefusedError",
    "SyncTimeoutError",
    "__version__",
    "active_trust_policy",
    "escape_invisible",
    "get_global_counter",
    "load_persistent_memory",
    "open_view",
    "read_entries",
    "read_facts",
    "read_history",
    "read_tags",
    "recall",
    "recall_memory",
    "redact_value",
]
