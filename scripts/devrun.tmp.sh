set -u
mkdir -p /tmp/p && tar xJf .gpu-pack/pack.tar.xz -C /tmp/p
export LD_LIBRARY_PATH=/tmp/p/lib CUBEKIT_SHARED_DATA=/tmp/p/data CUBEKIT_CLI=/tmp/p/bin/cubekit
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat /tmp/p/COMMIT
F='KmeansGpu.*:*Zernike*:WatershedTilesGpu.*:TilesGpu.*:ClassifyGpu.*'
start=$SECONDS
timeout 300 /tmp/p/bin/cubekit_gpu_tests --gtest_filter="$F" --gtest_output=json:$OUT/gpu.json > $OUT/gpu.log 2>&1
echo "gpu tests rc $? in $((SECONDS-start)) s"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests ran" $OUT/gpu.log | head -20
for tool in memcheck initcheck; do
  start=$SECONDS
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 /tmp/p/bin/cubekit_gpu_tests --gtest_filter='KmeansGpu.QuantizeTiledEqualsCpuWhole:ZernikeGpuInto.GroupsOfImagesEqualThePlainCall' --gtest_brief=1 > $OUT/san_$tool.log 2>&1
  echo "$tool: rc $? in $((SECONDS-start)) s"; tail -3 $OUT/san_$tool.log
done
