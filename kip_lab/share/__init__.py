"""KIP-932 share groups: share-partition leaders, share sessions, the persister and the share coordinator."""
