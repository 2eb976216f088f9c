// Reads one UI message stream with the AI SDK's own reader (shared by the scripts here).
//
// The stream is teed: one copy gives the chunk types in order, the other is
// folded by readUIMessageStream into the assistant UIMessage. SDK errors are
// collected (the reader stops at the first one).
import { readUIMessageStream } from 'ai';

export async function readUIStream(stream, errors) {
  const [forTypes, forMessage] = stream.tee();
  const chunkTypes = [];
  const collecting = (async () => {
    for await (const chunk of forTypes) chunkTypes.push(chunk.type);
  })();
  let streamed;
  for await (const message of readUIMessageStream({
    stream: forMessage,
    onError: error => errors.push(String(error)),
    terminateOnError: true,
  })) {
    streamed = message;
  }
  await collecting;
  return { chunkTypes, streamed };
}
