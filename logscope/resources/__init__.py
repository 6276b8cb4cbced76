"""What analyze may spend: the memory budget (``budget``), the memory probes (``memory``) and the time range
looked at (``time_range``), shared by every stage."""
