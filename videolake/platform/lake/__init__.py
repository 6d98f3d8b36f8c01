"""The Delta Lake side: table schemas and specs, reading and committing partitions, transactions, files, lineage."""
