"""--anonymize: de-identification (PS3.15), keyed pseudonyms, names without patient identity, and the last check before
a volume counts as done."""
