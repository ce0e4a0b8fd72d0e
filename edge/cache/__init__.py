"""What an edge keeps and how: entries, their keys, stores and codec, freshness, coalescing, fill
leases, pre-warming, the popular list, removed items, the explanation cache, prepared pools,
rendered bytes, HTTP cache headers and the decision record of a served entry."""
