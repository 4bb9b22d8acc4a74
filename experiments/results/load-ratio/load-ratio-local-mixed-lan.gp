set terminal pngcairo size 960,540 font 'DejaVu Sans,11'
set grid ytics
set key below horizontal
set output 'experiments/results/load-ratio/load-ratio-local-mixed-lan.png'
set title 'Share of the graph on desktop (local-mixed-lan) against wall time'
set xlabel 'share of the vertex weight on desktop'
set ylabel 'seconds (median, min..max)'
set yrange [0:*]
set xrange [0:1.05]
set arrow from 0.6165, graph 0 to 0.6165, graph 1 nohead dt 2 lc rgb '#c00000'
set label 'profile' at 0.6165, graph 0.95 offset 0.5,0 tc rgb '#c00000'
plot 'experiments/results/load-ratio/load-ratio-local-mixed-lan.dat' index 0 using 1:2:3:4 with yerrorlines title 'mesh2d-1000x1000 pagerank async metis', 'experiments/results/load-ratio/load-ratio-local-mixed-lan.dat' index 1 using 1:2:3:4 with yerrorlines title 'mesh2d-1000x1000 pagerank sync metis', 'experiments/results/load-ratio/load-ratio-local-mixed-lan.dat' index 2 using 1:2:3:4 with yerrorlines title 'rmat-16 pagerank async metis', 'experiments/results/load-ratio/load-ratio-local-mixed-lan.dat' index 3 using 1:2:3:4 with yerrorlines title 'rmat-16 pagerank sync metis'
