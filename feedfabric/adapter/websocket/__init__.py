"""GraphQL over WebSocket at /graphql: both published subscription protocols, owned here.

graphql-transport-ws (`transport`) and the legacy graphql-ws of
subscriptions-transport-ws (`legacy`) run on Starlette's public WebSocket and
the schema's public `stream` (Strawberry's one entry for an operation of any
type over a streaming transport). Around them: what a frame may be and how it
is written (`frames`), who may open a socket (`origins`), who is on it
(`auth`), and the socket's life, its message budget and its send queue
(`connection`, `endpoint`).
"""
