"""The curation belt: documents in, a clean corpus, rejects with reasons and statistics out."""
