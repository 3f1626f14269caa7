-- GET /limited-drops/{id} of random ids, as an anonymous client probing for drops would: ids up
-- to 9e15, almost all of which name no drop.
math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16))

request = function()
  local id = string.format("%d%09d", math.random(1, 9000000), math.random(0, 999999999))
  return wrk.format("GET", "/limited-drops/" .. id)
end
