"""The conversions every Spark product shares: Tablestore values and rows to Arrow (:mod:`.values`), tunnel
records to sink writes and change-log rows and back (:mod:`.changes`)."""
