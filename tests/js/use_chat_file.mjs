// Sends a picture with a question the way useChat does, with the AI SDK's own code.
//
// usage: node use_chat_file.mjs BASE_URL CONVERSATION_ID TOKEN TEXT PNG_BASE64
//
// A Chat (the class behind useChat, over an in-memory state) sends the text
// and a file part (a data: URL, as convertFileListToFileUIParts makes from a
// picked file) through DefaultChatTransport; the SDK's parser checks every
// chunk of the answer. Then GET .../chat/ is validated with
// validateUIMessages. Prints one JSON object: the chat's status and messages,
// the validated history and the SDK's errors. Exits non-zero on any SDK error.
import { AbstractChat, DefaultChatTransport, validateUIMessages } from 'ai';

const [baseUrl, conversationId, token, text, png] = process.argv.slice(2);
const api = `${baseUrl}/api/conversations/${conversationId}/chat/`;
const headers = { Authorization: `Token ${token}` };

class MemoryState {
  status = 'ready';
  error = undefined;
  messages = [];
  pushMessage = message => {
    this.messages = this.messages.concat(message);
  };
  popMessage = () => {
    this.messages = this.messages.slice(0, -1);
  };
  replaceMessage = (index, message) => {
    this.messages = [
      ...this.messages.slice(0, index),
      message,
      ...this.messages.slice(index + 1),
    ];
  };
  snapshot = thing => structuredClone(thing);
}

class Chat extends AbstractChat {
  constructor(init) {
    super({ ...init, state: new MemoryState() });
  }
}

const errors = [];
const chat = new Chat({
  id: conversationId,
  transport: new DefaultChatTransport({ api, headers }),
  onError: error => errors.push(String(error)),
});
await chat.sendMessage({
  text,
  files: [
    { type: 'file', mediaType: 'image/png', filename: 'dot.png', url: `data:image/png;base64,${png}` },
  ],
});

const response = await fetch(api, { headers });
if (!response.ok) throw new Error(`GET ${api}: ${response.status}`);
const history = await validateUIMessages({ messages: await response.json() });

// The file part's URL serves the bytes to the owner.
const filePart = history[0].parts.find(part => part.type === 'file');
const content = filePart ? await fetch(new URL(filePart.url, baseUrl), { headers }) : null;
const served = content ? Buffer.from(await content.arrayBuffer()).toString('base64') : null;

process.stdout.write(
  JSON.stringify({
    chat: { status: chat.status, messages: chat.messages },
    history,
    served,
    errors,
  }),
);
if (errors.length) process.exit(1);
