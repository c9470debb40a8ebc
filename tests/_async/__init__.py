"""Hand-written tests against the async twin; tests/_sync is generated from here."""
