-- wrk script: the purchase generator of purchase.lua (a new buyer and key per request), plus a
-- count of the answers by status, printed at the end as `status <code> <count>` lines so a
-- scenario can check the client's 202s against what the database sold.
dofile("loadtest/wrk/purchase.lua")

local threads_list = {}
local purchase_setup = setup

function setup(thread)
  purchase_setup(thread)
  table.insert(threads_list, thread)
end

counts = {}

function response(status, headers, body)
  counts[status] = (counts[status] or 0) + 1
end

function done(summary, latency, requests)
  local total = {}
  for _, thread in ipairs(threads_list) do
    for status, n in pairs(thread:get("counts")) do
      total[status] = (total[status] or 0) + n
    end
  end
  for status, n in pairs(total) do
    io.write(string.format("status %d %d\n", status, n))
  end
end
