/*
 * Reading Server-Sent Events from a fetch() response (so the page can send
 * ``Last-Event-ID`` itself). The parser is pure: it takes text and calls back
 * with whole events, which is what the unit tests drive.
 */

/** True when ``response`` carries an event stream (not the JSON of a finished run). */
export const isEventStream = (response) =>
  (response.headers.get("Content-Type") || "").includes("text/event-stream");

/**
 * A parser of ``text/event-stream`` text. ``onEvent({id, type, data})`` gets
 * each event (``data`` as text) and returns true to stop; ``feed(text)``
 * returns true once it stopped. Comments (keep-alives) and events without
 * data are skipped, as the format says.
 */
export function createEventParser(onEvent) {
  let buffer = "";
  let event = { id: null, type: "message", data: [] };
  let stopped = false;

  function line(text) {
    if (text === "") {
      const complete = event;
      event = { id: null, type: "message", data: [] };
      return complete.data.length
        ? Boolean(onEvent({ id: complete.id, type: complete.type, data: complete.data.join("\n") }))
        : false;
    }
    if (text.startsWith(":")) {
      return false;
    }
    const colon = text.indexOf(":");
    const field = colon < 0 ? text : text.slice(0, colon);
    let value = colon < 0 ? "" : text.slice(colon + 1);
    if (value.startsWith(" ")) {
      value = value.slice(1);
    }
    if (field === "data") {
      event.data.push(value);
    } else if (field === "event") {
      event.type = value;
    } else if (field === "id") {
      event.id = value;
    }
    return false;
  }

  return {
    feed(text) {
      if (stopped) {
        return true;
      }
      buffer += text;
      let end;
      while ((end = buffer.indexOf("\n")) >= 0) {
        const text = buffer.slice(0, end).replace(/\r$/, "");
        buffer = buffer.slice(end + 1);
        if (line(text)) {
          stopped = true;
          return true;
        }
      }
      return false;
    },
  };
}

/** Read a response's event stream until it ends or ``onEvent`` returns true. */
export async function readEventStream(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const parser = createEventParser(onEvent);
  for (;;) {
    const { value, done } = await reader.read();
    if (done) {
      return;
    }
    if (parser.feed(decoder.decode(value, { stream: true }))) {
      reader.cancel().catch(() => {});
      return;
    }
  }
}
