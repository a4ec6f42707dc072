"""The web pages, one module per page family. Views stay thin: access → validate → one service → render."""
