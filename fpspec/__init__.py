"""fpspec: a bit-exact specification and simulator of 4-bit block-scaled floating point."""

__version__ = "0.1.0"
#: The version of the numeric specification (docs/, requirement ids, vector semantics).
SPEC_VERSION = "1"
