"""Privacy audits of every mechanism with :func:`dpstream.audit.audit` (DESIGN rule 5)."""
