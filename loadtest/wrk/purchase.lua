-- wrk script: POST /limited-drops/{DROP_ID}/orders with a new buyer and key per request.
-- DROP_ID comes from the environment, and SKU for a drop in sizes (the size every request
-- buys); every thread numbers its buyers from its own range so no two requests share a buyer.
local drop = os.getenv("DROP_ID") or "1"
local sku = os.getenv("SKU")
local body = '{"quantity":1}'
if sku and sku ~= "" then
  body = '{"quantity":1,"sku":"' .. sku .. '"}'
end
local threads = 0
local counter = 0

-- A global on purpose: setup() runs in wrk's main Lua state and thread:set() writes the
-- thread's *globals*; a chunk-level `local base` would shadow it and every thread would send
-- the same buyers (their repeats came back as replayed 202s).
base = 0

function setup(thread)
  threads = threads + 1
  thread:set("base", threads * 100000000)
end

request = function()
  counter = counter + 1
  local user = base + counter
  return wrk.format("POST", "/limited-drops/" .. drop .. "/orders", {
    ["X-User-Id"] = tostring(user),
    ["Idempotency-Key"] = "wrk-" .. tostring(user),
    ["Content-Type"] = "application/json",
  }, body)
end
