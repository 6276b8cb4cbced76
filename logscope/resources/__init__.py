"""What analyze may spend: the memory budget (``budget``), the memory probes (``memory``) and the time range
looked at (``scope``), shared by every stage."""
