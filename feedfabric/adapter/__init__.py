"""Where the API meets its servers: GraphQL over HTTP and both WebSocket protocols on Starlette, uvicorn's
serving options, and the GraphQL engine room (execution/), the one folder that subclasses an execution
class of Strawberry or graphql-core and the only one that touches graphql-core methods marked private
(its docstring holds the version pins and why). Strawberry's documented extension points (schema
extensions, the schema class) are used where the schema is, in feedfabric.schema."""
