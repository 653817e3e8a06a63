// Strata's Jinja engine against Hugging Face's own JavaScript one (@huggingface/jinja, what transformers.js applies
// chat templates with): every real template in ../shared/models/chat_templates renders a fixed set of conversations
// in both, and the outputs must be byte-identical. A case @huggingface/jinja itself cannot render must be listed in
// REFERENCE_CANNOT_RENDER below with the reason; a case where the template refuses the conversation
// (raise_exception) must make Strata raise the same message. Then a list of smaller constructs, rendered by both.
//
//   node hf_jinja_reference.mjs --jinja <node_modules>/@huggingface/jinja --templates <dir> --renderer <strata_render_template>
//        [--only <substring of a template name>] [--verbose]
//
// Exit status: 0 all renderable cases identical, 1 a difference (or a stale allow-list entry), 77 (skip) when the
// @huggingface/jinja package is not installed (npm ci --prefix tests/reference).
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const SKIP = 77;

function parseArgs(argv) {
	const args = { verbose: false };
	for (let i = 2; i < argv.length; ++i) {
		const a = argv[i];
		if (a === "--verbose") args.verbose = true;
		else if (a.startsWith("--")) args[a.slice(2)] = argv[++i];
	}
	for (const required of ["jinja", "templates", "renderer"]) {
		if (!args[required]) {
			console.error(`usage: node hf_jinja_reference.mjs --jinja DIR --templates DIR --renderer EXE (missing --${required})`);
			process.exit(2);
		}
	}
	return args;
}

const args = parseArgs(process.argv);
const jinjaEntry = join(resolve(args.jinja), "dist", "index.js");
if (!existsSync(jinjaEntry)) {
	console.log(`SKIP hf_jinja_reference: ${jinjaEntry} not found; install it with: npm ci --prefix tests/reference`);
	process.exit(SKIP);
}
if (!existsSync(args.renderer)) {
	console.error(`hf_jinja_reference: renderer ${args.renderer} not found (build strata_render_template)`);
	process.exit(1);
}

// strftime_now() reads the clock through Date: both engines see 2026-01-02 03:04:05 local time.
const NOW = [2026, 0, 2, 3, 4, 5];
const NOW_TEXT = "2026-01-02T03:04:05";
const RealDate = Date;
globalThis.Date = class extends RealDate {
	constructor(...a) {
		super(...(a.length ? a : NOW));
	}
	static now() {
		return new RealDate(...NOW).getTime();
	}
};
const january = new Intl.DateTimeFormat(undefined, { month: "short" }).format(new Date());
if (january !== "Jan") {
	console.error(`hf_jinja_reference: this Node formats January as "${january}"; run it with LC_ALL=C (English month names)`);
	process.exit(1);
}

const { Template, Environment } = await import(pathToFileURL(jinjaEntry).href);

// raise_exception's errors are told apart from the engine's own: the template refused the conversation.
class TemplateRaise extends Error {}
const originalSet = Environment.prototype.set;
Environment.prototype.set = function (name, value) {
	if (name === "raise_exception") {
		value = (message) => {
			throw new TemplateRaise(String(message));
		};
	}
	return originalSet.call(this, name, value);
};

// --- The conversations (OpenAI / transformers message format). ---

const TOOLS = [
	{
		type: "function",
		function: {
			name: "get_weather",
			description: "Get the current weather in a city.",
			parameters: {
				type: "object",
				properties: {
					city: { type: "string", description: "The city name, e.g. Paris" },
					unit: { type: "string", enum: ["celsius", "fahrenheit"], description: "Temperature unit" },
					days: { type: "integer", description: "Days of forecast" },
				},
				required: ["city"],
			},
		},
	},
	{
		type: "function",
		function: {
			name: "search_notes",
			description: "Search the user's notes.",
			parameters: {
				type: "object",
				properties: {
					query: { type: "string", description: "Words to look for" },
					tags: { type: "array", items: { type: "string" }, description: "Only notes with these tags" },
					limit: { type: "number", description: "At most this many results" },
					archived: { type: "boolean", description: "Include archived notes" },
				},
				required: ["query"],
			},
		},
	},
];

const SYSTEM = { role: "system", content: "You are a helpful assistant. Answer briefly." };

function toolConversation(argumentsAsText) {
	const args = { city: "Paris", unit: "celsius" };
	return [
		SYSTEM,
		{ role: "user", content: "What's the weather in Paris?" },
		{
			role: "assistant",
			content: "",
			tool_calls: [
				{
					id: "Ab12Cd34E",
					type: "function",
					function: { name: "get_weather", arguments: argumentsAsText ? JSON.stringify(args) : args },
				},
			],
		},
		{ role: "tool", tool_call_id: "Ab12Cd34E", name: "get_weather", content: '{"temperature": 18, "condition": "sunny"}' },
		{ role: "assistant", content: "It is 18 °C and sunny in Paris." },
		{ role: "user", content: "Thanks! And tomorrow?" },
	];
}

// Two parallel calls, content null (as OpenAI clients send it), and arguments with non-ASCII text, quotes, a float,
// a boolean and a list, for the templates' JSON and number printing.
const PARALLEL_TOOLS = [
	{ role: "user", content: "Weather in Zürich ☀️, and my \"café\" notes?" },
	{
		role: "assistant",
		content: null,
		tool_calls: [
			{ id: "Ab12Cd34E", type: "function", function: { name: "get_weather", arguments: { city: "Zürich", days: 3 } } },
			{
				id: "Fg56Hi78J",
				type: "function",
				function: {
					name: "search_notes",
					arguments: { query: 'café "best"', tags: ["food", "travel"], limit: 2.5, archived: false },
				},
			},
		],
	},
	{ role: "tool", tool_call_id: "Ab12Cd34E", name: "get_weather", content: '{"temperature": 21.5, "condition": "cloudy"}' },
	{ role: "tool", tool_call_id: "Fg56Hi78J", name: "search_notes", content: "[]" },
	{ role: "assistant", content: "21.5 °C and cloudy; no café notes." },
	{ role: "user", content: "Ok." },
];

const MULTI_TURN = [
	SYSTEM,
	{ role: "user", content: "Hello! Who are you?" },
	{ role: "assistant", content: "I am an assistant. How can I help?" },
	{ role: "user", content: "What is 2 + 2?" },
];

const CONVERSATIONS = [
	{ id: "user", messages: [{ role: "user", content: "Hello! Who are you?" }] },
	{ id: "multi", messages: MULTI_TURN },
	{ id: "tools", messages: toolConversation(false), extra: { tools: TOOLS } },
	{ id: "tools_text", messages: toolConversation(true), extra: { tools: TOOLS } },
	{ id: "tools_multi", messages: PARALLEL_TOOLS, extra: { tools: TOOLS } },
	{
		id: "parts",
		messages: [
			SYSTEM,
			{ role: "user", content: [{ type: "text", text: "Describe a cat." }, { type: "text", text: "One sentence." }] },
			{ role: "assistant", content: [{ type: "text", text: "A cat is a small furry animal." }] },
			{ role: "user", content: [{ type: "text", text: "And a dog?" }] },
		],
	},
	{
		id: "think",
		messages: [
			{ role: "user", content: "What is 2 + 2?" },
			{
				role: "assistant",
				content: "<think>\nSimple arithmetic.\n</think>\n\nIt is 4.",
				reasoning_content: "Simple arithmetic.",
			},
			{ role: "user", content: "And 3 + 3?" },
		],
	},
	{ id: "no_think", messages: MULTI_TURN, extra: { enable_thinking: false } },
	{
		id: "kwargs",
		messages: MULTI_TURN,
		extra: {
			reasoning_effort: "high",
			date_string: "02 Jan 2026",
			enable_thinking: true,
			functions: JSON.stringify(TOOLS.map((t) => t.function)), // firefunction-v2's own arguments
			datetime: "2026-01-02 03:04",
		},
	},
];

const CASES = CONVERSATIONS.flatMap((c) =>
	[false, true].map((gen) => ({
		id: `${c.id}${gen ? "+gen" : ""}`,
		context: {
			messages: c.messages,
			add_generation_prompt: gen,
			bos_token: "<s>",
			eos_token: "</s>",
			...(c.extra ?? {}),
		},
	})),
);

// --- What @huggingface/jinja 0.5.11 cannot render, and why (checked against Python Jinja2 3.1.6 set up as
// transformers does). "Python fails too" means the template does not support that conversation at all; Strata then
// fails as well, with the location. Each entry: template file, case ids (without "+gen": both), reason. ---
const TEXT_ARGUMENTS = "calls .items() on tool-call arguments given as a JSON string (Python fails too)";
const REFERENCE_CANNOT_RENDER = [
	["Bielik-11B-v3.0-Instruct.jinja", ["parts"], "calls .lstrip() on content given as a list of parts (Python fails too)"],
	["Bielik-11B-v3.0-Instruct.jinja", ["tools_multi"], "tests `'...' in content` with content null (Python fails too)"],
	["GLM-4.7-Flash.jinja", ["tools_text"], TEXT_ARGUMENTS],
	["GigaChat3.1-10B-A1.8B.jinja", ["tools", "tools_text", "tools_multi"],
		'calls .items() on a JSON schema that has an "items" key: @huggingface/jinja calls the key\'s value; Python and Strata call the dict method'],
	["Kimi-K2-Instruct.jinja", ["tools", "tools_text", "tools_multi"], "uses list.append/pop, which @huggingface/jinja lacks (Strata renders as Python)"],
	["LFM2.5-8B-A1B.jinja", ["tools_text"], TEXT_ARGUMENTS],
	["LFM2.5-8B-A1B.jinja", ["tools_multi"], "loops over content null (Python fails too)"],
	["MiniMax-M2.jinja", ["tools_text"], TEXT_ARGUMENTS],
	["NVIDIA-Nemotron-Nano-v2.jinja", ["parts"], "calls .replace() on content given as a list of parts (Python fails too)"],
	["NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", ["*"],
		"loops over `tools` when undefined, which @huggingface/jinja refuses (Python and Strata: no iterations), and indexes a dict with an " +
			"undefined key; Strata renders, except that where Python prints list[Union[]] it prints list[Any] (@huggingface/jinja's " +
			"`is iterable` is false for undefined), and it adds parts to text as @huggingface/jinja's + does where Python fails"],
	["Qwen3-Coder.jinja", ["tools_text"], "applies |items to tool-call arguments given as a JSON string (Python fails too)"],
	["deepseek-ai-DeepSeek-V4-Flash-0731.jinja", ["tools_text"], "parses text arguments with from_json, llama.cpp's filter, which @huggingface/jinja lacks (Strata has it)"],
	["fireworks-ai-llama-3-firefunction-v2.jinja", ["user", "multi", "tools", "tools_text", "tools_multi", "parts", "think", "no_think"],
		"needs the `functions` and `datetime` arguments (given in the kwargs case only; Python fails too)"],
	["ibm-granite-granite-3.3-2B-Instruct.jinja", ["tools_multi"], "adds content null to a string (Python fails too)"],
	["llama-cpp-rwkv-world.jinja", ["parts"], "applies |trim to content given as a list of parts: refused by @huggingface/jinja and Strata (Python prints the list)"],
	["meetkai-functionary-medium-v3.2.jinja", ["tools", "tools_text", "tools_multi"],
		"unpacks a list of tuples in a for loop, which @huggingface/jinja refuses; with dict arguments it adds them to a string, which Python " +
			'refuses and Strata does as @huggingface/jinja\'s + would ("[object Map]")'],
	["meta-llama-Llama-3.2-3B-Instruct.jinja", ["parts"], "applies |trim to content given as a list of parts: refused by @huggingface/jinja and Strata (Python prints the list)"],
	["microsoft-Phi-3.5-mini-instruct.jinja", ["tools_multi"], "adds content null to a string (Python fails too)"],
	["openbmb-MiniCPM5-1B.jinja", ["tools", "tools_multi"],
		"uses the min filter, which @huggingface/jinja lacks (Strata renders; it prints lists and booleans in arguments as @huggingface/jinja does, Python as ['a'] and False)"],
	["openbmb-MiniCPM5-1B.jinja", ["tools_text"], TEXT_ARGUMENTS],
	["poolside-Laguna-XS-2.1.jinja", ["tools_text"], TEXT_ARGUMENTS],
	["tencent-Hy3.jinja", ["*"], "uses str.format, which @huggingface/jinja lacks (Strata renders as Python)"],
	["tencent-Hy3.jinja", ["tools_text"], TEXT_ARGUMENTS],
	["unsloth-mistral-Devstral-Small-2507.jinja", ["tools_multi"], "indexes content null with [0] (Python fails too)"],
];

function allowListed(template, caseId) {
	const conversation = caseId.replace(/\+gen$/, "");
	const reasons = REFERENCE_CANNOT_RENDER.filter(([t, cases]) => t === template && (cases.includes("*") || cases.includes(conversation)));
	return reasons.length ? reasons.map(([, , reason]) => reason).join("; ") : null;
}

// --- Constructs the templates use little or not at all, each rendered by both engines against one context:
// number printing, JavaScript equality and text conversion, slicing, loops, whitespace control. Every one must be
// one @huggingface/jinja renders. ---
const CONSTRUCT_CONTEXT = {
	xs: [3, 1, 2],
	s: "Hello World",
	d: { b: 2, a: 1, "z z": [1, 2] },
	f: 1.5,
	n: null,
	t: true,
	e: "",
	u8: "ßüñ😀",
	nested: [{ a: { b: [10, 20] } }, { a: { b: [30] } }],
	msgs: [
		{ role: "user", content: "hi" },
		{ role: "assistant", content: "yo" },
	],
	big: 12345678901234567890,
	neg: -3,
	fl: [1.0, 2.5, -0.0],
};
const CONSTRUCTS = [
	"{{ 1 }}|{{ 1.0 }}|{{ 1.5 }}|{{ -0.0 }}|{{ 0.1 + 0.2 }}|{{ 10 ** 21 }}|{{ 10.0 ** 21 }}|{{ 2 ** -1 }}|{{ 007 }}|{{ 3.14159 }}",
	"{{ 7 / 2 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 % 3 }}|{{ -7 % 3 }}|{{ 7.5 % 2 }}|{{ 1 / 3 }}|{{ 2 ** 0.5 }}|{{ 100000000000000000000 }}|{{ 0.000001 }}|{{ 0.0000001 }}",
	"{{ 1 / 0 }}|{{ -1 / 0 }}|{{ 1 // 0 }}|{{ 0 // 0 }}|{{ 5 % 0 }}|{{ 9007199254740993 }}|{{ 10.0 ** 20 * 10 }}|{{ 123456789.0 * 1000000000000 }}",
	"{{ -0 }}|{{ 0 * -1 }}|{{ 0.0 * -1 }}|{{ 1 / 3 * 3 }}|{{ 2 ** 53 + 1 }}|{{ 10 ** 16 }}|{{ 10 ** 22 }}|{{ 0.1 * 3 }}|{{ 1 / 10000000 }}|{{ 1 / 40000000 }}",
	"{{ big }}|{{ neg }}|{{ -neg }}|{{ f * 2 }}|{{ f + 1 }}|{{ fl }}|{{ fl[2] }}|{{ fl[0] }}|{{ fl|tojson }}|{{ [0.1, 10.0 ** 21, 1.5 / 10000000, -2.0, 100] | tojson }}",
	"{{ 3|float }}|{{ 3.7|int }}|{{ -3.7|int }}|{{ '3.7'|int }}|{{ '3.7'|float }}|{{ 'x'|int }}|{{ 'x'|float }}|{{ '  42abc'|int }}|{{ '1e3'|float }}|{{ true|int }}|{{ 3.7|int(0) }}|{{ 3|float(0) }}|{{ 'x'|int(5) }}",
	"{{ -5|abs }}|{{ -5.5|abs }}|{{ (-5)|abs }}|{{ - 5 }}|{{ -(5) }}|{{ +5 }}|{{ -true }}|{{ 2 ** 3 ** 2 }}|{{ 10 - 2 - 3 }}|{{ (10 ** 21) | string }}|{{ 5.0|string }}|{{ 5.0 ~ '' }}",
	"{{ 'a' ~ 1 ~ 1.0 ~ true ~ [1, 2] }}|{{ 'a' + 1 }}|{{ 1 + 'a' }}|{{ 'x' ~ d }}|{{ 'x' ~ [1.0, none, 'q', [2]] }}",
	"{{ s|upper }}|{{ s|lower }}|{{ s|title }}|{{ 'hello wORLD don\\'t'|title }}|{{ 'hELLO'|capitalize }}|{{ u8|upper }}|{{ u8|length }}|{{ u8|capitalize }}|{{ 'ß'|upper }}",
	"{{ 'ÄÖ'.lower() }}|{{ 'straße'.upper() }}|{{ 'İ'.lower() }}|{{ 'ΟΔΟΣ ΟΔΟΣ'.lower() }}|{{ 'ǆ'.upper() }}|{{ 'éa b'|title }}|{{ 'ﬁx'.upper() }}|{{ '😀a'.length }}|{{ '😀a'|capitalize }}|{{ 'ßa'|capitalize }}",
	"{{ s.upper() }}|{{ '  x  '.strip() }}|{{ '  x  '.lstrip() }}|{{ '  x  '.rstrip() }}|{{ s.startswith('He') }}|{{ s.endswith(('x', 'ld')) }}|{{ s.length }}",
	"{{ s.split() }}|{{ s.split('o') }}|{{ s.split('o', 1) }}|{{ '  a  b c '.split() }}|{{ ' a b c '.split(none, 1) }}|{{ 'a,b,,c'.split(',') }}|{{ 'a b c'.split(' ', 0) }}|{{ 'a-b-c'.split('-', -1) }}",
	"{{ 'a\u00a0b\u3000c'.split() }}|{{ '\u3000 x \u00a0'|trim }}|{{ '\u3000x'.strip() }}|{{ 'x\u2028y'.split() }}",
	"{{ s.replace('o', '0') }}|{{ s.replace('o', '0', 1) }}|{{ s.replace('', '-') }}|{{ s|replace('l', 'L') }}|{{ 'aaa'.replace('a', 'b', 2) }}",
	"{{ s[0] }}|{{ s[-1] }}|{{ s[1:3] }}|{{ s[::-1] }}|{{ s[::2] }}|{{ s[-3:] }}|{{ s[:-3] }}|{{ s[100] }}|{{ u8[3] }}|{{ u8[::-1] }}|{{ u8[0:4] }}",
	"{{ xs[0] }}|{{ xs[-1] }}|{{ xs[1:] }}|{{ xs[::-1] }}|{{ xs[5] }}|{{ xs[0:0] }}|{{ xs[-1:0:-1] }}|{{ xs[2:0:-1] }}|{{ xs[::0] }}|{{ xs.0 }}|{{ xs.-1 }}",
	"{{ 'Hello'[1:4:2] }}|{{ 'Hello'[4:1:-1] }}|{{ [1,2,3,4,5][-1:-4:-1] }}|{{ [1,2,3,4,5][10:] }}|{{ [1,2,3,4,5][:-10] }}|{{ [1,2,3][-10:2] }}",
	"{{ s|trim }}|{{ '  a b  '|trim }}|{{ s|length }}|{{ s|join('-') }}|{{ s|string }}",
	"{{ 'a\nb\n\nc'|indent }}|{{ 'a\nb'|indent(2, true) }}|{{ 'a\n\nb'|indent(2, first=true, blank=true) }}|{{ 'a\nb'|indent(width=1) }}",
	"{{ 'x' in s }}|{{ 'H' in s }}|{{ 'q' not in s }}|{{ 'a' in d }}|{{ 'q' in d }}|{{ 1 in xs }}|{{ 5 not in xs }}|{{ 1 in missing }}|{{ 'user' in msgs|map(attribute='role') }}",
	"{{ 'a\\tb\\\\c\\'d\\\"e' }}|{{ \"x\\u00e9y\" }}|{{ '\\x41' }}|{{ 'q' 'r' \"s\" }}|{{ \"it's\" }}|{{ 'back\\\\slash' }}",
	"{{ xs }}|{{ xs|length }}|{{ xs|sort }}|{{ xs|sort(reverse=true) }}|{{ xs|reverse }}|{{ xs|first }}|{{ xs|last }}|{{ xs|join(', ') }}|{{ xs|unique }}|{{ xs|list }}|{{ xs|string }}",
	"{{ d }}|{{ d|length }}|{{ d|items }}|{{ d.items() }}|{{ d.keys() }}|{{ d.values() }}|{{ d|dictsort }}|{{ d|dictsort(reverse=true) }}|{{ d.get('a') }}|{{ d.get('q') }}|{{ d.get('q', 5) }}",
	"{{ d['a'] }}|{{ d.a }}|{{ d['z z'] }}|{{ d.missing }}|{{ d.missing is defined }}|{{ d['missing'] is undefined }}|{{ nested[0].a.b[1] }}|{{ nested|map(attribute='a.b.0')|list }}",
	"{{ d|tojson }}|{{ d|tojson(indent=2) }}|{{ xs|tojson(indent=2) }}|{{ [] |tojson(indent=2) }}|{{ {} |tojson(indent=2) }}|{{ {'a': [1, {'b': none}]}|tojson(indent=1) }}|{{ u8|tojson }}|{{ u8|tojson(ensure_ascii=true) }}|{{ 'a\"b\\n\\u0001'|tojson }}|{{ d|tojson(separators=(',', ':')) }}",
	"{{ 'a/b<c>&\\'d'|tojson }}|{{ 'tab\\there'|tojson }}|{{ '\\u007f\\u0080'|tojson(ensure_ascii=true) }}|{{ msgs[0]|tojson }}|{{ msgs|tojson(indent=2) }}",
	"{{ none|tojson }}|{{ none|default('x') }}|{{ missing|tojson }}|{{ [missing]|tojson }}|{{ {'a': missing}|tojson }}|{{ [missing] }}|{{ {'a': missing} }}",
	"{{ [1, 2] + [3] }}|{{ [1, [2, 3]] }}|{{ [1, 'a', none, true, 1.5] }}|{{ {'k': 'v', 'n': none} }}|{{ (1, 2) is sequence }}|{{ [1,2] is iterable }}|{{ d is mapping }}|{{ d is iterable }}",
	"{{ msgs|selectattr('role', 'equalto', 'user')|list }}|{{ msgs|rejectattr('role', 'equalto', 'user')|list|length }}|{{ msgs|selectattr('content')|list|length }}|{{ msgs|map(attribute='role')|join(',') }}|{{ msgs|selectattr('nope', 'defined')|list }}",
	"{{ xs|sort|first }}|{{ ['b', 'A', 'a', 'C']|sort }}|{{ ['b', 'A', 'a', 'C']|sort(case_sensitive=true) }}|{{ msgs|sort(attribute='role')|map(attribute='content')|join }}|{{ [3, 1.5, true, 0]|sort }}",
	"{{ ['a', 'A', 'a', 1, 1.0]|unique }}|{{ [none, none]|unique|length }}|{{ xs|sort(true) }}|{{ ['b','a']|sort(false, true) }}|{{ d|dictsort(true) }}|{{ d|dictsort(false, 'key', true) }}",
	"{{ xs|join }}|{{ [1.0, 2.5, true, none, 'a']|join(',') }}|{{ [[1, 2], [3]]|join(';') }}|{{ [{'a': 1}]|join }}",
	"{{ 1 is odd }}|{{ 2 is even }}|{{ none is none }}|{{ x is undefined }}|{{ xs is defined }}|{{ 's' is string }}|{{ 1 is number }}|{{ 1.5 is integer }}|{{ t is boolean }}|{{ t is true }}|{{ false is false }}|{{ range is callable }}|{{ 'abc' is lower }}|{{ 'ABC' is upper }}|{{ s is not string }}",
	"{{ n is none }}|{{ n == none }}|{{ missing == none }}|{{ 1 == 1.0 }}|{{ '1' == 1 }}|{{ 1 == true }}|{{ [1] == [1] }}|{{ xs == xs }}|{{ '' == 0 }}|{{ 0 == false }}|{{ none == false }}|{{ [] == false }}|{{ [1] == 1 }}|{{ d == d }}",
	"{{ 1 < 2 }}|{{ 2 >= 2.0 }}|{{ 1 and 2 }}|{{ 0 or 'x' }}|{{ none or [] }}|{{ [] or none }}|{{ not [] }}|{{ not d }}|{{ not 0.0 }}|{{ 'a' if t else 'b' }}|{{ 'a' if not t }}|{{ 'yes' if xs }}|{{ e or 'empty' }}",
	"{{ 'x' if [] else 'y' }}|{{ 'x' if {} else 'y' }}|{{ 'x' if namespace() else 'y' }}|{{ 'x' if 0.0 else 'y' }}|{{ true and 'yes' }}|{{ false and 'yes' }}|{{ 1 if false else 2 if false else 3 }}",
	"{{ msgs[0] == msgs[0] }}|{{ msgs[0] == msgs[1] }}|{{ msgs[0] in msgs }}|{{ msgs|last == msgs[-1] }}|{{ msgs[0].role|upper ~ ':' ~ msgs[0]['content'] }}|{{ (msgs|last).content }}|{{ msgs|length - 1 }}",
	"{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{{ loop.revindex0 }}|{% endfor %}",
	"{% for x in xs %}{{ loop.previtem }}-{{ loop.nextitem }};{% endfor %}|{% for x in [5] %}{{ loop }}{% endfor %}",
	"{% for x in xs if x > 1 %}{{ x }}{{ loop.length }}{% else %}none{% endfor %}|{% for x in [] %}a{% else %}empty{% endfor %}",
	"{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}|{% for k in d %}{{ k }}{% endfor %}|{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}",
	"{% for x in xs %}{{ x }}{% if x == 1 %}{% break %}{% endif %}{% endfor %}|{% for x in xs %}{{ x }}{% if x == 1 %}{% continue %}{% endif %}!{% endfor %}",
	"{% for x in xs %}{% continue %}{% else %}else-ran{% endfor %}|{% for x in xs %}{% break %}{% else %}else-ran2{% endfor %}",
	"{% for a in [1, 2] %}{% for b in [3, 4] %}{{ loop.index }}{{ a }}{{ b }}{% endfor %}{{ loop.index }}{% endfor %}|{% for a in [1, 2] %}{% set outer = loop %}{% for b in [3, 4] %}{{ outer.index }}{{ loop.index }};{% endfor %}{% endfor %}",
	"{% set a = 1 %}{% for x in xs %}{% set a = a + x %}{{ a }}{% endfor %}|{{ a }}|{% set x = 5 %}{% if true %}{% set x = 6 %}{% endif %}{{ x }}|{% for i in [1] %}{% set x = 7 %}{% endfor %}{{ x }}",
	"{% set ns = namespace(c=0, items=[]) %}{% for x in xs %}{% set ns.c = ns.c + x %}{% endfor %}{{ ns.c }}|{{ ns }}|{{ ns.items }}|{{ ns.missing }}|{% set ns.items = ns.items + [1] %}{{ ns.items }}",
	"{% set a, b = 1, 2 %}{{ a }}{{ b }}|{% set c = (1, 2) %}{{ c|length }}|{% set tt %}body {{ s }}{% endset %}[{{ tt }}]|{% set y = {'k': [1, 2]} %}{{ y.k }}{{ y['k'][0] }}",
	"{% if t %}A{% elif n %}B{% else %}C{% endif %}|{% if n %}A{% elif t %}B{% else %}C{% endif %}|{% if n %}A{% elif n %}B{% else %}C{% endif %}|{% if xs|length > 2 and xs[0] == 3 %}ok{% endif %}",
	"{% macro m(a, b=2, c='x') %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ m(1) }}|{{ m(1, 3) }}|{{ m(1, c='z') }}|{{ m(a=5) }}|{% macro m2(a, b=a) %}{{ a }}{{ b }}{% endmacro %}{{ m2(1) }}{{ m2(1, 2) }}{{ m2(none) }}",
	"{% macro m() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, k=3) }}|{% macro fact(k) %}{% if k <= 1 %}1{% else %}{{ k }}*{{ fact(k - 1) }}{% endif %}{% endmacro %}{{ fact(5) }}",
	"{% macro outer() %}[{{ caller() }}]{% endmacro %}{% call outer() %}inside {{ s }}{% endcall %}|{% macro outer2() %}[{{ caller(5) }}]{% endmacro %}{% call(v) outer2() %}got {{ v }}{% endcall %}",
	"{% macro show() %}{{ x }}{% endmacro %}{% for x in xs %}{{ show() }}{% endfor %}",
	"{% filter upper %}abc {{ s }}{% endfilter %}|{% filter trim %}   padded   {% endfilter %}|{% filter replace('a', 'b') %}aaa{% endfilter %}",
	"a  {%- if t -%}  b  {%- endif -%}  c",
	"a\n  {% if t %}\n  b\n  {% endif %}\n  c\n",
	"x {{- ' y ' -}} z|{#- comment -#}  w  {# c2 #}  v",
	"  {%- set q = 1 %}\n{{ q }}\n{# x #}\n{{ q }}",
	"line1\n    {% for x in xs %}\n    item {{ x }}\n    {% endfor %}\nend",
	"{% if t %}\r\nyes\r\n{% endif %}",
	"a {% generation %} b {% endgeneration %} c|{%- generation -%} x {%- endgeneration -%}|",
	"{#- a -#}\n\n  text  \n\n{#- b #}|{# multi\nline #}end",
	"a %}\nb #}\nc -}\nd }}\ne",
	"{{ '{{' }}|{{ '}}' }}|{{ {'a': {'b': 1}} }}|{{ {'a': 1}}}|{{ '{' }}{{ '}' }}|{{ {'a': '}}'} }}|x}}y",
	"{{ range(3) }}|{{ range(1, 4) }}|{{ range(5, 0, -2) }}|{{ range(0) }}|{{ range(3)|length }}",
	"{{ raise_exception is defined }}|{{ namespace(a=1).a }}|{{ namespace({'a': 2}).a }}|{{ none }}|{{ missing }}|{{ true }}|{{ True }}|{{ None }}",
	"{{ s.missing_method is defined }}|{{ xs.length }}|{{ d.length }}|{{ (1).x }}|{{ none.x }}|{{ missing.y.z }}|{{ 'ab'.x }}|{{ d.get is defined }}|{{ d.items is defined }}",
	"{{ [{'a': 1}, {'b': 2}]|map(attribute='a', default='D')|list }}|{{ [1, 2] + [] }}|{{ [] + [] }}",
	"{{ x|default('dflt') }}|{{ e|default('dflt') }}|{{ e|default('dflt', true) }}|{{ n|default('dflt') }}|{{ n|default('dflt', true) }}|{{ 0|default(5, true) }}",
	"{{ strftime_now('%Y-%m-%d %H:%M %b %B %%') }}",
	"{{ x is defined and x.y }}|{{ none.attr }}|{{ (none or {}).get('a', 'D') }}|{{ xs[1] if xs|length > 1 }}|{{ 'z' if xs|length > 5 }}|",
];

// --- Render everything with both engines. ---

const templateDir = resolve(args.templates);
const templates = readdirSync(templateDir)
	.filter((f) => f.endsWith(".jinja") && (!args.only || f.includes(args.only)))
	.sort();
if (templates.length === 0) {
	console.error(`hf_jinja_reference: no .jinja files in ${templateDir}`);
	process.exit(1);
}

const rows = [];
const jobs = [];
for (const file of templates) {
	const path = join(templateDir, file);
	const source = readFileSync(path, "utf8");
	let template = null;
	let parseError = null;
	try {
		template = new Template(source);
	} catch (e) {
		parseError = e;
	}
	for (const c of CASES) {
		let reference;
		if (parseError) {
			reference = { error: `parse: ${parseError.message}` };
		} else {
			try {
				reference = { output: template.render(structuredClone(c.context)) };
			} catch (e) {
				reference = e instanceof TemplateRaise ? { raised: e.message } : { error: e.message };
			}
		}
		rows.push({ template: file, caseId: c.id, reference });
		jobs.push({ template_file: path, context: c.context, now: NOW_TEXT });
	}
}

const constructReference = CONSTRUCTS.map((source) => {
	try {
		return { output: new Template(source).render(structuredClone(CONSTRUCT_CONTEXT)) };
	} catch (e) {
		return { error: e.message };
	}
});
for (const source of CONSTRUCTS) jobs.push({ template: source, context: CONSTRUCT_CONTEXT, now: NOW_TEXT });

const run = spawnSync(args.renderer, [], { input: JSON.stringify({ jobs }), maxBuffer: 1 << 30, encoding: "utf8" });
if (run.status !== 0) {
	console.error(`hf_jinja_reference: ${args.renderer} failed (${run.status}): ${run.stderr}`);
	process.exit(1);
}
const results = JSON.parse(run.stdout);

// --- Compare. ---

const SYMBOL = { identical: "=", differs: "X", both_raise: "r", reference_unavailable: "-", unlisted: "?", stale: "S" };
const counts = Object.fromEntries(Object.keys(SYMBOL).map((k) => [k, 0]));
const problems = [];

// Outputs compare as the UTF-8 bytes a caller gets (a lone surrogate in a JavaScript string becomes U+FFFD there).
const utf8 = (text) => Buffer.from(text, "utf8");

function firstDifference(a, b) {
	let i = 0;
	while (i < a.length && i < b.length && a[i] === b[i]) ++i;
	const show = (s) => JSON.stringify(s.slice(Math.max(0, i - 60), i + 60));
	return `at character ${i}:\n      reference: ${show(a)}\n      strata:    ${show(b)}`;
}

rows.forEach((row, k) => {
	const strata = results[k];
	const ref = row.reference;
	const reason = allowListed(row.template, row.caseId);
	if (ref.error !== undefined) {
		if (reason) {
			row.status = "reference_unavailable";
			row.note = reason;
		} else {
			row.status = "unlisted";
			problems.push(`${row.template} [${row.caseId}]: @huggingface/jinja fails and the case is not in REFERENCE_CANNOT_RENDER: ${ref.error}`);
		}
	} else if (reason) {
		row.status = "stale";
		problems.push(`${row.template} [${row.caseId}]: listed in REFERENCE_CANNOT_RENDER (${reason}) but @huggingface/jinja renders it`);
	} else if (ref.raised !== undefined) {
		if (strata.raised && strata.message === ref.raised) {
			row.status = "both_raise";
		} else {
			row.status = "differs";
			problems.push(`${row.template} [${row.caseId}]: the template raises "${ref.raised}" in @huggingface/jinja; Strata: ${strata.output !== undefined ? "renders" : strata.error}`);
		}
	} else if (strata.output !== undefined && utf8(strata.output).equals(utf8(ref.output))) {
		row.status = "identical";
	} else {
		row.status = "differs";
		problems.push(
			`${row.template} [${row.caseId}]: ` +
				(strata.output === undefined ? `Strata fails: ${strata.error}` : `outputs differ ${firstDifference(ref.output, strata.output)}`),
		);
	}
	counts[row.status]++;
});

let constructsIdentical = 0;
CONSTRUCTS.forEach((source, i) => {
	const ref = constructReference[i];
	const strata = results[rows.length + i];
	if (ref.error !== undefined) {
		problems.push(`construct ${JSON.stringify(source)}: @huggingface/jinja cannot render it (${ref.error}); every construct must be one it renders`);
	} else if (strata.output !== undefined && utf8(strata.output).equals(utf8(ref.output))) {
		++constructsIdentical;
	} else {
		problems.push(
			`construct ${JSON.stringify(source)}: ` +
				(strata.output === undefined ? `Strata fails: ${strata.error}` : `outputs differ ${firstDifference(ref.output, strata.output)}`),
		);
	}
});

// The table: one row per template, one column per case.
const caseIds = CASES.map((c) => c.id);
const nameWidth = Math.max(...templates.map((t) => t.length));
console.log(`Strata vs @huggingface/jinja on ${templates.length} templates x ${caseIds.length} cases`);
console.log(`${"".padEnd(nameWidth)}  ${caseIds.map((_, i) => String(i + 1).padStart(2)).join(" ")}`);
for (const file of templates) {
	const marks = rows.filter((r) => r.template === file).map((r) => SYMBOL[r.status].padStart(2));
	console.log(`${file.padEnd(nameWidth)}  ${marks.join(" ")}`);
}
console.log(`cases: ${caseIds.map((id, i) => `${i + 1}=${id}`).join(" ")}`);
console.log(
	`legend: = identical   r both raise (same message)   - reference cannot render (listed)   X differs   ? reference fails, not listed   S listed but renders`,
);
console.log(
	`summary: ${counts.identical} identical, ${counts.both_raise} both raise, ${counts.reference_unavailable} reference cannot render, ` +
		`${counts.differs} differ, ${counts.unlisted} unlisted reference failures, ${counts.stale} stale list entries`,
);
console.log(`constructs: ${constructsIdentical} of ${CONSTRUCTS.length} identical`);
const unavailable = rows.filter((r) => r.status === "reference_unavailable");
if (unavailable.length) {
	console.log("reference cannot render:");
	const byReason = new Map();
	for (const r of unavailable) {
		const key = `${r.template}: ${r.note}`;
		const strata = results[rows.indexOf(r)];
		byReason.set(key, [...(byReason.get(key) ?? []), `${r.caseId}${strata.output !== undefined ? "" : " (Strata: error)"}`]);
	}
	for (const [key, ids] of byReason) console.log(`  ${key} [${ids.join(", ")}]`);
}
if (args.verbose) {
	for (const [k, row] of rows.entries()) {
		if (row.status === "reference_unavailable") console.log(`  ${row.template} [${row.caseId}] reference: ${row.reference.error}; Strata: ${results[k].error ?? "renders"}`);
	}
}
if (problems.length) {
	console.log(`\n${problems.length} problem(s):`);
	for (const p of problems) console.log(`  ${p}`);
	process.exit(1);
}
console.log("every renderable case is byte-identical");
