"""The worker core: what runs jobs inside a consumer process."""
