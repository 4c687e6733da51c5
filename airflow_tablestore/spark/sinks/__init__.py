"""Where the consumer's rounds go: the sink protocol and the two sinks (a fenced Tablestore replica, a Parquet
change log), each in its own module."""
