"""JVM options for the Spark drivers and executors the tests and benchmarks start."""

FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""Driver JVM options that halve Spark start-up on a small machine (tests and benchmarks only: C1 JIT)."""
