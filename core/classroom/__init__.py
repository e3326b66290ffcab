"""The classroom wing: checkpoint answers kept in an embedded SQLite database, and what a teacher reads of them."""
