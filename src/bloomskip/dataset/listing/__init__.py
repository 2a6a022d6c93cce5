"""Where a dataset's files come from: a folder or glob, an object-store prefix, a table snapshot."""
