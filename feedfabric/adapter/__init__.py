"""The one folder that subclasses or configures Strawberry, graphql-core, uvicorn or websockets, through their documented extension points only."""
