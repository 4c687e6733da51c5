"""The tunnel as a Spark Structured Streaming source: span planning, read tasks, span ends, output rows."""
