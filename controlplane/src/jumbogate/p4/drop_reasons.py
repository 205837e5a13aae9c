"""Drop reasons of the jumbogate data plane: p4src/include/drop_reasons.p4's DROP_* constants.

Values index the `drop_reasons` counter. Made of the generated `defines`
module (make proto), so a reason added to the P4 appears here by itself.
"""

from .constants import enum_of

DropReason = enum_of("DropReason", "DROP_", "Why the data plane dropped a packet (the `drop_reasons` counter's index).")
