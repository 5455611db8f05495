// GraphQL over HTTP: plain requests, multipart uploads and the operation documents.
//
// Every operation the playground runs is a file of ./operations/, the same
// files a developer pastes into GraphiQL; `operation(name)` loads one.

const documents = new Map();

/** The text of ./operations/NAME.graphql (fetched once). */
export async function operation(name) {
  if (!documents.has(name)) {
    documents.set(name, fetch(new URL(`./operations/${name}.graphql`, import.meta.url)).then((r) => {
      if (!r.ok) throw new Error(`operation ${name} not found`);
      return r.text();
    }));
  }
  return documents.get(name);
}

/** An error the API answered with; `code` is extensions.code (e.g. UNAUTHENTICATED). */
export class GraphQLError extends Error {
  constructor(errors) {
    super(errors.map((e) => e.message).join("; "));
    this.errors = errors;
    this.code = errors[0]?.extensions?.code ?? null;
  }
}

/** A client bound to an endpoint and a bearer token (or none). */
export class GraphQLClient {
  constructor(endpoint, token = null) {
    this.endpoint = endpoint;
    this.token = token;
  }

  headers(extra = {}) {
    return this.token ? { ...extra, Authorization: `Bearer ${this.token}` } : extra;
  }

  /** Runs the named operation of ./operations/ and returns its data. */
  async run(name, variables = {}) {
    const query = await operation(name);
    const response = await fetch(this.endpoint, {
      method: "POST",
      headers: this.headers({ "Content-Type": "application/json" }),
      body: JSON.stringify({ query, variables, operationName: name }),
    });
    return unwrap(response);
  }

  /**
   * Runs an operation whose variable `fileVariable` is a File, with the
   * GraphQL multipart request spec: parts "operations", "map" and "0".
   */
  async upload(name, variables, fileVariable, file) {
    const query = await operation(name);
    const form = new FormData();
    form.append("operations", JSON.stringify({
      query, operationName: name, variables: { ...variables, [fileVariable]: null },
    }));
    form.append("map", JSON.stringify({ 0: [`variables.${fileVariable}`] }));
    form.append("0", file, file.name);
    const response = await fetch(this.endpoint, { method: "POST", headers: this.headers(), body: form });
    return unwrap(response);
  }
}

async function unwrap(response) {
  let body;
  try {
    body = await response.json();
  } catch {
    throw new Error(`HTTP ${response.status}`);
  }
  if (body.errors?.length) throw new GraphQLError(body.errors);
  if (!response.ok) throw new Error(body.error?.message ?? `HTTP ${response.status}`);
  return body.data;
}
