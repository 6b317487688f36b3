"""Thin resolvers: each turns GraphQL arguments into a service call and shapes the result."""
