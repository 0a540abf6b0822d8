"""The record's own words for a number that is not to be read, shared by the record, its version 1 reader and
every view."""

NOT_INTERPRETABLE = "judge does not discriminate: scores not interpretable"
NO_HISTORY_NOTE = "uses no history: gains 0 by construction"
