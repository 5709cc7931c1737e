"""The database: connection pool, embedded server, migrations, extensions, tenancy, transfer.

Private: the public API is ``timestone``."""
