// A small client for the graphql-transport-ws protocol (the one GraphiQL and
// graphql-ws speak): connection_init/connection_ack, subscribe/next/error/
// complete, ping/pong. It reconnects with backoff and subscribes again; a
// subscription's variables may be a function, read at every (re)subscribe,
// so homeTimeline can resume from the newest cursor the page has seen.

const PROTOCOL = "graphql-transport-ws";
const KEEPALIVE_MS = 20_000;
// Close codes after which trying again cannot help (bad token, bad message).
const FATAL_CLOSE_CODES = new Set([4400, 4401, 4403, 4409]);

export class TransportWsClient {
  /**
   * @param {string} url              ws(s)://host/graphql
   * @param {object} connectionParams sent as connection_init's payload
   * @param {(state: string) => void} onState  "connecting" | "open" | "closed" | "refused"
   */
  constructor(url, connectionParams, onState = () => {}) {
    this.url = url;
    this.connectionParams = connectionParams;
    this.onState = onState;
    this.subscriptions = new Map(); // id -> {query, variables, sink}
    this.nextId = 1;
    this.socket = null;
    this.acknowledged = false;
    this.closedByUser = false;
    this.retries = 0;
    this.keepalive = null;
  }

  /**
   * Starts an operation; `sink` has next(data), error(err) and complete().
   * Returns a function that stops it.
   */
  subscribe(query, variables, sink) {
    const id = String(this.nextId++);
    this.subscriptions.set(id, { query, variables, sink });
    if (this.acknowledged) this.sendSubscribe(id);
    else this.connect();
    return () => {
      if (this.subscriptions.delete(id) && this.acknowledged) this.send({ id, type: "complete" });
    };
  }

  /** Closes the socket for good. */
  dispose() {
    this.closedByUser = true;
    clearInterval(this.keepalive);
    this.subscriptions.clear();
    this.socket?.close(1000, "bye");
  }

  connect() {
    if (this.socket || this.closedByUser) return;
    this.onState("connecting");
    const socket = new WebSocket(this.url, PROTOCOL);
    this.socket = socket;
    socket.onopen = () => this.send({ type: "connection_init", payload: this.connectionParams });
    socket.onmessage = (event) => this.receive(JSON.parse(event.data));
    socket.onclose = (event) => this.closed(event);
  }

  receive(message) {
    const subscription = this.subscriptions.get(message.id);
    switch (message.type) {
      case "connection_ack":
        this.acknowledged = true;
        this.retries = 0;
        this.onState("open");
        this.keepalive = setInterval(() => this.send({ type: "ping" }), KEEPALIVE_MS);
        for (const id of this.subscriptions.keys()) this.sendSubscribe(id);
        break;
      case "ping":
        this.send({ type: "pong", payload: message.payload });
        break;
      case "pong":
        break;
      case "next":
        if (message.payload.errors?.length) subscription?.sink.error(message.payload.errors);
        else subscription?.sink.next(message.payload.data);
        break;
      case "error":
        this.subscriptions.delete(message.id);
        subscription?.sink.error(message.payload);
        break;
      case "complete":
        this.subscriptions.delete(message.id);
        subscription?.sink.complete?.();
        break;
      default:
        console.warn("graphql-transport-ws: unexpected message", message);
    }
  }

  sendSubscribe(id) {
    const { query, variables } = this.subscriptions.get(id);
    const vars = typeof variables === "function" ? variables() : variables;
    this.send({ id, type: "subscribe", payload: { query, variables: vars ?? {} } });
  }

  send(message) {
    if (this.socket?.readyState === WebSocket.OPEN) this.socket.send(JSON.stringify(message));
  }

  closed(event) {
    clearInterval(this.keepalive);
    this.socket = null;
    this.acknowledged = false;
    if (this.closedByUser) return this.onState("closed");
    if (FATAL_CLOSE_CODES.has(event.code)) {
      for (const { sink } of this.subscriptions.values()) sink.error([{ message: event.reason || `closed ${event.code}` }]);
      this.subscriptions.clear();
      return this.onState("refused");
    }
    this.onState("closed");
    if (this.subscriptions.size === 0) return;
    const delay = Math.min(30_000, 500 * 2 ** this.retries++) * (0.5 + Math.random() / 2);
    setTimeout(() => this.connect(), delay);
  }
}
