"""Files copied into the judge and candidate sandboxes (run there as scripts, standard library only)."""
