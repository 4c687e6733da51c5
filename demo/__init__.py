"""``make demo`` (repository tooling, not part of the installed package: it drives the repository's ``dags/``)."""
