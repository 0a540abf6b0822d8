"""The core: records, Arrow schemas, the Parquet store, hashing, errors, parsing. Imports nothing else of perseval."""
