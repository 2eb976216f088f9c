// Asks for structured output the way a useChat frontend does, with the AI SDK's own code.
//
// usage: node structured_output.mjs BASE_URL CONVERSATION_ID TOKEN TEXT SCHEMA_JSON
//
// DefaultChatTransport sends the chat request with `output_schema` in its
// body (useChat's `body` option); its parser checks every chunk against
// uiMessageChunkSchema and readUIMessageStream folds them into the assistant
// UIMessage, where a `data-output` chunk becomes a `data-output` part.
// Prints one JSON object: the chunk types, the message's parts and the SDK's
// errors. Exits non-zero on any SDK error.
import { DefaultChatTransport } from 'ai';

import { readUIStream } from './ui_stream.mjs';

const [baseUrl, conversationId, token, text, schema] = process.argv.slice(2);
const transport = new DefaultChatTransport({
  api: `${baseUrl}/api/conversations/${conversationId}/chat/`,
  headers: { Authorization: `Token ${token}` },
  body: { output_schema: JSON.parse(schema) },
});

const stream = await transport.sendMessages({
  chatId: conversationId,
  messages: [{ id: 'client-1', role: 'user', parts: [{ type: 'text', text }] }],
  trigger: 'submit-message',
  messageId: undefined,
  abortSignal: undefined,
});
const errors = [];
const { chunkTypes, streamed } = await readUIStream(stream, errors);

process.stdout.write(JSON.stringify({ chunkTypes, parts: streamed?.parts ?? [], errors }));
if (errors.length) process.exit(1);
