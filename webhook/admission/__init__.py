"""The admission webhook: review types, pure policy and mutation, and the aiohttp server that calls them."""
